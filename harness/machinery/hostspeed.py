"""The host's CPU speed during a real run: the CPU time a fixed piece of Python takes, sampled.

Why: on a shared machine the speed of a core moves while nothing on it changes. On the 2-core
host this was written on, a loop of integer arithmetic and numpy took 17 to 31 ms of CPU a few
seconds apart with the host idle (200,000 iterations and 2,000 small array operations, every
5 s), and a real kill-primary run's acked pushes/s went from 182 to 228 between runs of the
same seeds. This module's loop (UNIT_LOOPS), sampled in a separate process every 0.1 s inside
each of 12 such runs, read 2.4 to 2.8 ms on average over a run's training window, and that mean
and the run's acked pushes/s correlated at r = -0.73. The probe as shipped (a thread of the
harness, every 0.25 s, 0.9 to 1.4 ms) read in the 30 real runs of one `pschaos sim validate`
(6 scenarios x 5 seeds) correlated with their acked pushes/s at r = -0.87 (each run's two
figures over its scenario's mean; within one scenario, from -0.99 to +0.27 where the probe
hardly moved): the host's speed moved them. The twin
(harness/backends/sim/cpu.py) runs at the speed its calibration was measured at unless told otherwise,
so `pschaos sim validate` compares each real run with a twin slowed down by what the probe read
during that run against what it read during the calibration's runs of the same kind
(`host_slowdown`, calibration.py `host_probe_ms`).

What it measures: the thread CPU time (time.thread_time) of UNIT_LOOPS iterations of integer
arithmetic, every PERIOD_S seconds, in a daemon thread of the harness process, with the time of
each sample; the runner averages the samples between the run's first and last acknowledged push
(its training window: the cluster's start-up, with its imports, is left out). Thread CPU time
leaves out the time the thread waited for a core or for the GIL, so it does not grow with how
many jobs share the cores (hostload.py's `background_cores` and the twin's processor sharing
model that). It does grow with whatever slows an instruction on the core it got: the core's
clock, a sibling hyperthread, shared caches and memory. Those come from other tenants and from
the run's own processes alike, so it reads the speed the run's code met, not the hardware's
alone. Calibrate reads its baseline in 2x3 training runs with two workers, the shape of most of
validate's scenarios; a larger cluster (scale-in's 4x3, ssp's three workers) adds its own share,
which the baseline does not hold. Its cost: about 1% of one core.
"""
from __future__ import annotations

import statistics
import sys
import threading
import time
from typing import Callable

UNIT_LOOPS = 20_000     # 1 to 3 ms of CPU on the host above: long against the clock's resolution
PERIOD_S = 0.25


def unit_ms() -> float:
    """One probe: the thread CPU milliseconds of the fixed loop."""
    c0 = time.thread_time()
    s = 0
    for i in range(UNIT_LOOPS):
        s += i * i
    return (time.thread_time() - c0) * 1000.0


def identity() -> dict:
    """What a probe figure is comparable under: the same loop, period and interpreter. A
    calibration records it beside its baseline, and validate corrects nothing when they differ."""
    return {"unit_loops": UNIT_LOOPS, "period_s": PERIOD_S,      # a patch release does not change the loop
            "python": ".".join(map(str, sys.version_info[:2])), "implementation": sys.implementation.name}


class SpeedProbe:
    """Samples `unit_ms` in a daemon thread from `start` to `stop`, each with `now()` (the run's
    clock); `summary` averages a window of them."""

    def __init__(self, period_s: float = PERIOD_S, now: Callable[[], float] = time.time) -> None:
        self.period_s, self.now = period_s, now
        self.samples: list[tuple[float, float]] = []
        self.error: str | None = None
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="pschaos-speed-probe", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._halt.wait(self.period_s):
                self.samples.append((self.now(), unit_ms()))
        except Exception as e:  # noqa: BLE001 - said in the summary: a partial window is no speed
            self.error = f"{type(e).__name__}: {e}"

    def stop(self) -> None:
        """End the sampling (idempotent; waits at most one sample)."""
        self._halt.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=2.0)

    def summary(self, start: float | None = None, end: float | None = None) -> dict:
        """report.json's `host_load` fields over the samples taken in [start, end] (the run's clock;
        None: unbounded): `probe_ms` (the mean, what the twin is scaled by), `probe_ms_p50`,
        `probe_samples`; `probe_ms` is None, with `probe_unknown` saying why, when no sample fell in
        the window or the probe failed."""
        if self.error is not None:
            return {"probe_ms": None, "probe_samples": 0, "probe_unknown": f"the probe failed: {self.error}"}
        xs = [ms for t, ms in list(self.samples)
              if (start is None or t >= start) and (end is None or t <= end)]
        if not xs:
            return {"probe_ms": None, "probe_samples": 0,
                    "probe_unknown": f"no sample in the training window (one every {self.period_s} s)"}
        return {"probe_ms": round(statistics.fmean(xs), 4), "probe_ms_p50": round(statistics.median(xs), 4),
                "probe_samples": len(xs)}


def over_training(probe: SpeedProbe, hist: list[dict], t0: float) -> dict:
    """The probe's summary over a run's training window: from its first to its last acknowledged
    push (a merged history's `t` is seconds after `t0`, the run's clock; the samples carry that
    clock's readings), so the cluster's start-up and teardown are left out."""
    oks = [e["t"] for e in hist if e.get("f") == "push" and e.get("type") == "ok"]
    if not oks:
        return {"probe_ms": None, "probe_samples": 0,
                "probe_unknown": "no acknowledged push: the run has no training window"}
    return probe.summary(t0 + min(oks), t0 + max(oks))


def usable(v: object) -> bool:
    """A probe figure one can divide by: a finite number above 0."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")


def slowdown(run_probe_ms: float | None, calibration_probe_ms: float | None) -> float | None:
    """How many times slower the host ran than when the calibration was measured: the ratio of the
    two probes, rounded to 4 places (validate.json and the run use the same figure); None when
    either is missing or not a positive number (no evidence: no correction)."""
    if not (usable(run_probe_ms) and usable(calibration_probe_ms)):
        return None
    return round(float(run_probe_ms) / float(calibration_probe_ms), 4)


__all__ = ["PERIOD_S", "SpeedProbe", "UNIT_LOOPS", "identity", "over_training", "slowdown", "unit_ms", "usable"]
