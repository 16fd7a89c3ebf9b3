"""CPU read over real training runs, not bursts: each process's CPU seconds polled through a run
(RunCpu) and cut to its training window, per push a copy's share, per call a worker's, and the
excess over the twin's own charges. calibrate_cpu.py holds the burst measurements; these are
what a busy host adds to them."""
from __future__ import annotations

import math
import statistics
import threading
import time
from typing import Any

from pschaos.harness.errors import HarnessError


class RunCpu:
    """The CPU seconds of every process a process-backend run started, by name, polled while it
    runs: (wall time, CPU seconds) samples, so a window of the run can be read (`between`). A
    reading is taken only while the handle says its process is alive, through one psutil.Process
    per handle (psutil checks the start time, so a pid the kernel handed to another process is
    never read as ours)."""

    def __init__(self, runner: Any, every: float = 0.2) -> None:
        self.runner, self.every = runner, every
        self.samples: dict[str, list[tuple[float, float]]] = {}
        self.error: BaseException | None = None
        self._procs: dict[int, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="calibrate-cpu", daemon=True)

    def _poll(self) -> None:
        import psutil

        try:
            while not self._stop.wait(self.every):
                for name, h in list(getattr(self.runner.backend, "procs", {}).items()):
                    try:
                        if not h.alive():
                            continue
                        p = self._procs.get(id(h))
                        if p is None:
                            p = self._procs[id(h)] = psutil.Process(h.pid)
                        t = p.cpu_times()
                    except psutil.Error:
                        continue
                    self.samples.setdefault(name, []).append((time.time(), t.user + t.system))
        except BaseException as e:  # noqa: BLE001 - handed to the caller in __exit__
            self.error = e

    def __enter__(self) -> "RunCpu":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.error is not None and exc[0] is None:
            raise HarnessError(f"calibrate: reading the real processes' CPU failed: {self.error!r}") from self.error

    def first_read(self, names: list[str]) -> float:
        """The wall time by which every named process had been read once (inf: one never was): a
        window starts no earlier, so no reading at its start is guessed (on a busy host the
        first poll of a copy came after the first step)."""
        firsts = [xs[0][0] if (xs := self.samples.get(n)) else math.inf for n in names]
        return max(firsts, default=math.inf)

    def between(self, names: list[str], a: float, b: float) -> dict[str, float]:
        """Each named process's CPU seconds from wall time `a` to `b` (interpolated between the
        samples around each); every one must have been sampled across the window (a calibration
        from a partial reading would set a copy's CPU from nothing)."""
        out = {}
        for n in names:
            xs = self.samples.get(n, [])
            if not xs or xs[0][0] > a or xs[-1][0] < b:
                raise HarnessError(f"calibrate: {n}'s CPU was not sampled across the training window of a real "
                                   "run; every copy and worker must be read across it")
            out[n] = _at(xs, b) - _at(xs, a)
        return out


def _at(xs: list[tuple[float, float]], t: float) -> float:
    """The value of a sampled, nondecreasing series at `t` (linear between samples)."""
    import bisect

    i = bisect.bisect_left(xs, (t, -math.inf))
    if i == 0:
        return xs[0][1]
    if i >= len(xs):
        return xs[-1][1]
    (t0, v0), (t1, v1) = xs[i - 1], xs[i]
    return v0 + (v1 - v0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)


def charged_between(log: list[tuple[float, str, float]], a: float, b: float) -> dict[str, float]:
    """The twin's CPU charged per process with virtual times in [a, b] (SimCPU.log entries; a
    process's line outside its GIL, cpu.py io_line, counts as its own)."""
    from pschaos.harness.backends.sim.cpu import process_of

    out: dict[str, float] = {}
    for t, owner, work in log:
        if a <= t <= b:
            p = process_of(owner)
            out[p] = out.get(p, 0.0) + work
    return out


def training_window(history: list[dict], tail_s: float = 0.0) -> tuple[float, float] | None:
    """The `t` of a run's first train-step event and `tail_s` before its last (None: no steps, or
    no window left). A run tears its processes down soon after its last step, and a poll every
    0.2 s had read a copy last 30 ms after it: a window to the last step was not always readable."""
    ts = [e["t"] for e in history if e["f"] == "train-step"]
    if len(ts) < 2 or max(ts) - tail_s <= min(ts):
        return None
    return min(ts), max(ts) - tail_s


def per_push_roles(history: list[dict], cpu: dict[str, float], window: tuple[float, float],
                   copies: int | None = None) -> tuple[float, float]:
    """A primary's and a replica's CPU seconds per push over the window, means over shards and
    replicas: each primary is the copy that acknowledged its shard's pushes (a push's `ok` names
    it), its pushes the new ones acknowledged within the window; its shard's other copies in `cpu`
    are its replicas. A primary without a reading, or a shard with other than `copies - 1`
    replicas read, is refused: a calibration must not set a copy's CPU from a zero."""
    a, b = window
    pushes: dict[str, int] = {}
    for e in history:
        if e["f"] == "push" and e["type"] == "ok" and a <= e["t"] <= b and not e["value"].get("duplicate"):
            n = e["value"].get("node")
            if n:
                pushes[n] = pushes.get(n, 0) + 1
    prim, repl = [], []
    for node, n in pushes.items():
        if node not in cpu:
            raise HarnessError(f"calibrate: no CPU reading of {node}, the primary that acknowledged {n} pushes")
        shard = _shard_of(node)
        mine = [v / n for k, v in cpu.items() if k != node and _shard_of(k) == shard]
        if copies is not None and len(mine) != copies - 1:
            raise HarnessError(f"calibrate: {len(mine)} replicas of {node} read, not {copies - 1}")
        prim.append(cpu[node] / n)
        repl += mine
    return (statistics.fmean(prim) if prim else 0.0), (statistics.fmean(repl) if repl else 0.0)


def _shard_of(name: str) -> int | None:
    """The shard of a copy's name (`shard-S/C`), None for any other process (a worker, etcd)."""
    from pschaos.psnodes.placement import parse_node_name

    try:
        return parse_node_name(name)[0]
    except ValueError:
        return None


WINDOW_TAIL_S = 0.5     # a window ends this long before the last step: the processes exit soon after it


def worker_windows(history: list[dict], workers: list[str], tail_s: float = WINDOW_TAIL_S, min_s: float = 1.0,
                   start: float = -math.inf) -> dict[str, tuple[float, float]]:
    """Each worker's own training window: its first train-step to `tail_s` before its last (a
    worker that finished first exits while the others train, and a poll every 0.2 s may have
    read its process last before its final step), and no earlier than `start` (its first reading).
    A real worker with less than `min_s` of it is refused: its CPU per call would rest on a few
    polls (the twin's charges are exact: any window with calls will do)."""
    steps: dict[str, list[float]] = {w: [] for w in workers}
    for e in history:
        if e["f"] == "train-step" and e["node"] in steps:
            steps[e["node"]].append(e["t"])
    out = {}
    for w, ts in steps.items():
        a, b = max(min(ts, default=0.0), start), max(ts, default=0.0) - tail_s
        if not ts or b - a < min_s or b <= a:
            raise HarnessError(f"calibrate: {w} trained for less than {min_s + tail_s:.1f} s after its process was "
                               "first read; too short a run to read its CPU per call from")
        out[w] = (a, b)
    return out


def per_call_workers(history: list[dict], cpu: dict[str, float], windows: dict[str, tuple[float, float]]) -> float:
    """A worker's CPU seconds per Push or Pull it made (its `invoke`s) over its window
    (`worker_windows`; `cpu` read over the same), the mean over the workers. A real worker's CPU
    goes with its calls, not its steps: after a scale-out from 2 shards to 4 a step's pulls and
    pushes doubled and so did most of its CPU (3.5 to 6.3 ms a step; 1.76 then 1.58 ms a push
    with its pull). A worker that made calls without a reading is refused, as a copy is."""
    calls = {w: 0 for w in windows}
    for e in history:
        w = e["node"]
        if w in calls and e["type"] == "invoke" and e["f"] in ("push", "pull") and windows[w][0] <= e["t"] <= windows[w][1]:
            calls[w] += 1
    per = []
    for w, n in calls.items():
        if not n:
            raise HarnessError(f"calibrate: {w} made no Push or Pull in its window {windows[w]}; no CPU per call to "
                               "read")
        if w not in cpu:
            raise HarnessError(f"calibrate: no CPU reading of {w}, which made {n} calls")
        per.append(cpu[w] / n)
    if not per:
        raise HarnessError("calibrate: no worker to read the CPU per call from")
    return statistics.fmean(per)


def copy_cpu_extras(real: list[tuple[float, ...]], sim: tuple[float, ...]) -> tuple[float, ...]:
    """Per role (a primary's CPU per push, a replica's per replicated push, a worker's per call:
    `per_push_roles` and `per_call_workers` of each run), what the real runs spend beyond what the
    twin charges: their median less the twin's, at least 0."""
    if not real:
        return tuple(0.0 for _ in sim)
    return tuple(round(max(0.0, statistics.median(r[i] for r in real) - sim[i]), 7) for i in range(len(sim)))


__all__ = ["RunCpu", "charged_between", "copy_cpu_extras", "per_call_workers", "per_push_roles", "training_window",
           "worker_windows", "WINDOW_TAIL_S"]
