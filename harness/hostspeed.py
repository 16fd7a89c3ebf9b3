"""The host's CPU speed during a real run: the CPU time a fixed piece of Python takes, sampled.

Why: on a shared machine the speed of a core moves while nothing on it changes. On the 2-core
host this was written on, the same loop took 17 to 31 ms of its own thread's CPU time a few
seconds apart with the host idle, and a real kill-primary run's acked pushes/s went from 182 to
228 between runs of the same seeds. Sampled inside each of 12 such runs, the loop's mean CPU time
and the run's acked pushes/s correlated at r = -0.73: the host's speed, not the cluster, moved
them. The twin (harness/sim/cpu.py) runs at the speed its calibration was measured at unless told
otherwise, so `pschaos sim validate` compares each real run with a twin slowed down by what the
probe read during that run against what it read during calibration (`host_slowdown`).

What it measures: the thread CPU time (time.thread_time) of UNIT_LOOPS iterations of integer
arithmetic, every PERIOD_S seconds, in a daemon thread of the harness process. Thread CPU time
leaves out the time the thread waited for a core or for the GIL, so the figure follows the speed
of the core it ran on (its clock, a neighbour on the same physical core), not how busy the host
is (that is hostload.py's `background_cores`). Its cost: about 1% of one core.
"""
from __future__ import annotations

import statistics
import threading
import time

UNIT_LOOPS = 20_000     # about 2 ms of CPU on the host above: long against the clock's resolution
PERIOD_S = 0.25


def unit_ms() -> float:
    """One probe: the thread CPU milliseconds of the fixed loop."""
    c0 = time.thread_time()
    s = 0
    for i in range(UNIT_LOOPS):
        s += i * i
    return (time.thread_time() - c0) * 1000.0


class SpeedProbe:
    """Samples `unit_ms` in a daemon thread from `start` to `stop`; `stop` summarizes."""

    def __init__(self, period_s: float = PERIOD_S) -> None:
        self.period_s = period_s
        self.samples: list[float] = []
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "SpeedProbe":
        self._thread = threading.Thread(target=self._loop, name="pschaos-speed-probe", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._halt.wait(self.period_s):
            self.samples.append(unit_ms())

    def stop(self) -> dict:
        """End the sampling (idempotent) and return report.json's `host_load` fields for it:
        `probe_ms` (the mean, what the twin is scaled by), `probe_ms_p50` and `probe_samples`; with no
        sample (a run shorter than one period), `probe_ms` is None."""
        self._halt.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        xs = list(self.samples)
        if not xs:
            return {"probe_ms": None, "probe_samples": 0}
        return {"probe_ms": round(statistics.fmean(xs), 4), "probe_ms_p50": round(statistics.median(xs), 4),
                "probe_samples": len(xs)}


def slowdown(run_probe_ms: float | None, calibration_probe_ms: float | None) -> float | None:
    """How many times slower the host ran than when the calibration was measured: the ratio of the
    two probes; None when either is missing or not a positive number (no evidence: no correction)."""
    ok = (lambda v: isinstance(v, (int, float)) and v > 0 and v == v and v != float("inf"))
    if not (ok(run_probe_ms) and ok(calibration_probe_ms)):
        return None
    return float(run_probe_ms) / float(calibration_probe_ms)


__all__ = ["PERIOD_S", "SpeedProbe", "UNIT_LOOPS", "slowdown", "unit_ms"]
