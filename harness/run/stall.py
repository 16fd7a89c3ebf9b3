"""A workload that stops progressing ends the run with a verdict, never with a test's timeout.

Without this a deadlock (a BSP barrier waiting for a clock nobody will reach, a job stuck in a
collective) held the run until pytest's timeout killed it, and left no report: CI went red with
nothing to read. The runner asks a StallWatch on every turn of its loop; every `period_s` it
reads on in the run's event files and counts the acknowledged steps there (psnodes' train-step,
an adapted system's workload-step, a training job's shim `step` ok). While a fault is open its
silence is the fault's, so the quiet time counts from the last heal. Quiet longer than the
bound (workload.stall_s) is a stall: the runner records `workload-stall` and stops driving;
checkers/progress.py judges it from the history, naming who waited for what.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from pschaos.harness.history.events import STEP_EVENTS


def progressed(line: str) -> bool:
    """An acknowledged step: a shim `step` only when ok (its failed steps are `info` lines with
    an error: a group failing its first step on every restart makes no progress)."""
    if '"f": "step", "value"' in line:
        return '"type": "ok"' in line
    return any(s in line for s in STEP_EVENTS) and '"type": "invoke"' not in line


class StallWatch:
    def __init__(self, files: Callable[[], list[Path]], bound_s: float, now: float, period_s: float = 0.5) -> None:
        self.files, self.bound, self.period = files, bound_s, period_s
        self.pos: dict[Path, int] = {}
        self.steps = 0
        self.polls = 0
        self.quiet_since = now
        self.next_poll = now
        self.longest = 0.0

    def tick(self, now: float, held: bool) -> float | None:
        """The seconds the workload has been quiet when that is past the bound, else None.
        `held`: a fault is open now."""
        if now < self.next_poll:
            return None
        self.next_poll = now + self.period
        self.polls += 1
        if self._new_steps() or held:
            self.quiet_since = now
            return None
        quiet = now - self.quiet_since
        self.longest = max(self.longest, quiet)
        return quiet if quiet > self.bound else None

    def _new_steps(self) -> int:
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
        self.steps += n
        return n

    def summary(self) -> dict:
        """What the watch saw, for the history: the evidence `progress` passes on (read through
        the end first: the last steps may have come after its last look)."""
        self._new_steps()
        return {"bound_s": self.bound, "polls": self.polls, "steps_seen": self.steps,
                "longest_quiet_s": round(self.longest, 3)}
