"""A workload that stops progressing ends the run with a verdict, never with a test's timeout.

Without this a deadlock (a BSP barrier waiting for a clock nobody will reach, a job stuck in a
collective) held the run until pytest's timeout killed it, and left no report: CI went red with
nothing to read. The runner asks a StallWatch on every turn of its loop; every `period_s` it
reads on in the run's event files and counts the acknowledged steps there (psnodes' train-step,
an adapted system's workload-step, a training job's shim `step` ok). While a fault is open its
silence is the fault's, so the quiet time counts from the last heal (a fault left open to the
end, a kill with no duration, holds the watch only for the bound after it started). Quiet longer than the
bound (workload.stall_s) is a stall: the runner records `workload-stall` and stops driving;
checkers/progress.py judges it from the history, naming who waited for what.

It watches each psnodes worker as well (its `train-step`s): one worker stuck while the others
step on (a pull that never returns, a barrier it alone waits at) is a stall as soon as that
worker has been quiet past the bound, not only once the others have finished. A worker that said
`train-done`, or is not running (killed, scaled in), is not watched.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from pschaos.harness.history.events import STEP_EVENTS


def progressed(line: str) -> bool:
    """An acknowledged step: a shim `step` only when ok (its failed steps are `info` lines with
    an error: a group failing its first step on every restart makes no progress)."""
    if '"f": "step", "value"' in line:
        return '"type": "ok"' in line
    return any(s in line for s in STEP_EVENTS) and '"type": "invoke"' not in line


def holding(open_faults: list, now: float, bound_s: float) -> bool:
    """Whether an open fault holds the watch: one healed at a time until it heals; any other
    only for `bound_s` after it started. One with no heal (a kill left down to the end) must let
    the workload go on around it, and one healed at a step heals only if the workload reaches
    that step: held until then, a workload that hung under it was held for good, and pytest's
    timeout ended the run with no report (review of issue 32, finding 1). Either way a stall
    after the bound is a verdict."""
    return any(o.heal_at_t is not None or now - o.start_t < bound_s for o in open_faults)


def running_on(backend) -> Callable[[str], bool]:
    """Whether a worker the watch follows runs now on `backend` (one killed or scaled in is not
    stuck; one the backend no longer knows is not running)."""
    def running(name: str) -> bool:
        try:
            return bool(backend.alive(name))
        except Exception:  # noqa: BLE001 - unknown to the backend: not running
            return False
    return running


class StallWatch:
    def __init__(self, files: Callable[[], list[Path]], bound_s: float, now: float, period_s: float = 0.5,
                 alive: Callable[[str], bool] = lambda worker: True) -> None:
        self.files, self.bound, self.period, self.alive = files, bound_s, period_s, alive
        self.last: dict[str, float] = {}     # psnodes worker -> when its last train-step was read
        self.done: set[str] = set()
        self.down: set[str] = set()          # watched workers not running at the last look
        self.stuck: list[str] = []           # the workers quiet past the bound, at the stall
        self.pos: dict[Path, int] = {}
        self.steps = 0
        self.polls = 0
        self.quiet_since = now
        self.next_poll = now
        self.longest = 0.0

    def tick(self, now: float, held: bool, hit: frozenset[str] = frozenset()) -> float | None:
        """The seconds the workload, or one running psnodes worker (`stuck` names them), has been
        quiet when that is past the bound, else None. `held`: a fault is open now; `hit`: the
        processes open faults target (a worker paused or cut by one is the fault's, not stuck,
        however long the fault lasts). A worker that comes back (restarted) is watched from then."""
        if now < self.next_poll:
            return None
        self.next_poll = now + self.period
        self.polls += 1
        stepped = self._new_steps(now)
        if held:
            self.last = dict.fromkeys(self.last, now)
        for w in self.last:
            up = self.alive(w)
            if up and w in self.down:
                self.last[w] = now
            (self.down.discard if up else self.down.add)(w)
        for w in hit & self.last.keys():
            self.last[w] = now
        if stepped or held:
            self.quiet_since = now
        quiet = now - self.quiet_since
        self.longest = max(self.longest, quiet)
        if quiet > self.bound:
            self.stuck = sorted(w for w in self.last if w not in self.done and self.alive(w))
            return quiet
        late = {w: now - t for w, t in self.last.items() if w not in self.done and now - t > self.bound}
        self.stuck = sorted(w for w in late if self.alive(w))
        return max(late[w] for w in self.stuck) if self.stuck else None

    def _new_steps(self, now: float | None = None) -> int:
        n = 0
        for p in self.files():
            pos = self.pos.get(p, 0)
            try:
                with open(p, "rb") as f:
                    f.seek(pos)
                    chunk = f.read()
            except OSError:
                continue
            whole = chunk[:chunk.rfind(b"\n") + 1]        # a line still being written is read next time
            self.pos[p] = pos + len(whole)
            for line in whole.decode("utf-8", "replace").splitlines():
                if progressed(line):
                    n += 1
                    if now is not None and '"train-step"' in line:
                        self._saw(line, now, self.last)
                elif '"train-done"' in line:
                    self._saw(line, now, None)
        self.steps += n
        return n

    def _saw(self, line: str, now: float | None, last: dict | None) -> None:
        """A psnodes worker's step (`last`: when it was read) or its end (None: no longer watched)."""
        try:
            worker = json.loads(line).get("node")
        except ValueError:
            return
        if not isinstance(worker, str):
            return
        if last is None:
            self.done.add(worker)
        else:                          # a step: watched (again: a worker stopped and started is back)
            self.done.discard(worker)
            last[worker] = now

    def summary(self) -> dict:
        """What the watch saw, for the history: the evidence `progress` passes on (read through
        the end first: the last steps may have come after its last look)."""
        self._new_steps()
        return {"bound_s": self.bound, "polls": self.polls, "steps_seen": self.steps,
                "longest_quiet_s": round(self.longest, 3)}
