"""The scale level's event loop: discrete events for what changes the cluster, vectorized steps
between them.

Events: a host fails or is repaired, a failover or restore completes, a copy is caught up, a
replica suspects a live primary (lost heartbeats), and explicit faults from a schedule. Between
two events the cluster's shape is fixed, so the training advances in one stroke: every stepping
worker's step counter moves by its rate times the interval (a numpy vector over the workers),
and the global step count by the cluster rate (params.step_rate). The model is dense: a step
pulls from and pushes to every shard, so while any shard does not ack, every worker stalls on it.
BSP also stalls while any worker is down (psnodes has no barrier membership yet: a barrier waits
for its dead member until it is back).

All draws come from one numpy Generator seeded with the run's seed, in event order: the same seed
gives the same result.
"""
from __future__ import annotations

import bisect
import heapq
import itertools
import math
import resource
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..calibration import Calibration
from .params import ScaleSpec, Timings, barrier_step, false_suspicion_rate, mean_step, step_rate, timings
from .shards import Shard

H = 3600.0


@dataclass
class Tally:
    failovers: int = 0
    spurious_failovers: int = 0
    failover_ms: list[float] = field(default_factory=list)          # failovers after a host failed
    spurious_ms: list[float] = field(default_factory=list)          # after a live primary was suspected
    lost_acked_updates: int = 0
    data_loss_events: int = 0
    shards_lost: set = field(default_factory=set)      # shards whose restore lost acked updates
    orphaned: set = field(default_factory=set)         # shards that had no in-sync copy left at some moment
    restores: int = 0
    incidents: list = field(default_factory=list)      # [t, ms, what]: failovers and restores
    worker_failures: int = 0
    server_failures: int = 0
    catchups: dict = field(default_factory=dict)
    catchup_bytes: float = 0.0
    stalled_s: float = 0.0
    shard_down_s: float = 0.0


class ScaleRun:
    def __init__(self, spec: ScaleSpec, cal: Calibration, progress: Callable[[str], None] | None = None,
                 cal_path: str | None = None) -> None:
        spec.check()
        self.spec, self.cal, self.say, self.cal_path = spec, cal, progress, cal_path
        self.t: Timings = timings(spec, cal)
        self.rng = np.random.default_rng(spec.seed)
        self.now, self.end = 0.0, spec.hours * H
        self.heap: list = []
        self.seq = itertools.count()
        self.events = 0
        self.shards = [Shard.new(i, spec.copies, spec.replication, spec.min_isr) for i in range(spec.shards)]
        self.down_since: dict[int, float] = {}        # shard -> when it stopped acking
        self.offset = np.zeros(spec.shards)           # head(s) = global acked - offset[s]
        self.worker_up = np.ones(spec.workers, dtype=bool)
        self.worker_steps = np.zeros(spec.workers)
        self.global_steps = 0.0                       # acked steps (each: one push per shard)
        self.rolled_back = 0.0                        # steps of progress lost to restores
        self.series: list[tuple[float, float]] = [(0.0, 0.0)]
        self.tally = Tally()
        self.target_at: float | None = None
        self.bsp = barrier_step(self.t, spec.workers, self.rng) if spec.training == "bsp" else None
        self.cv2 = math.exp(self.t.jitter ** 2) - 1
        self.last_rate = 0.0
        self.tick_s = max(1.0, min(60.0, self.end / 500))

    # scheduling ------------------------------------------------------------------------------
    def at(self, t: float, kind: str, *args: Any) -> None:
        if t <= self.end:
            heapq.heappush(self.heap, (t, next(self.seq), kind, args))

    def _first_failures(self) -> None:
        f, n = self.spec.failures, self.spec
        if f.worker_mtbf_h is not None:
            for j, dt in enumerate(f.worker_mtbf_h.draw(self.rng, n.workers, H)):
                self.at(float(dt), "worker-fail", j)
        if f.server_mtbf_h is not None:
            draws = f.server_mtbf_h.draw(self.rng, n.shards * n.copies, H)
            for k, dt in enumerate(draws):
                self.at(float(dt), "server-fail", k // n.copies, k % n.copies)
        rate = false_suspicion_rate(n) * max(n.copies - 1, 0)
        if rate > 0:
            for s in range(n.shards):
                self.at(float(self.rng.exponential(1 / rate)), "suspect", s)
        for f_ in n.schedule:
            self.at(float(f_["at_s"]), "scheduled", f_)

    # progress --------------------------------------------------------------------------------
    def rate(self) -> float:
        """Cluster steps per second now: a step that needs a shard that does not ack stalls its
        worker (dense: every step, while any shard is down; sparse: the chance that a step's
        `shards_per_step` shards avoid the down ones), and BSP stalls while it misses a worker."""
        avoid = self.avoid_down()
        if avoid == 0.0:
            return 0.0
        up = int(self.worker_up.sum())
        if self.bsp is not None:
            return 0.0 if up < self.spec.workers else avoid * step_rate(self.t, up, self.bsp) / up
        return avoid * step_rate(self.t, up)

    def avoid_down(self) -> float:
        """The chance that a step's shards miss every shard that does not ack now (hypergeometric)."""
        d, n, k = len(self.down_since), self.spec.shards, self.spec.touched
        if d == 0:
            return 1.0
        if n - d < k:
            return 0.0
        lg = math.lgamma      # C(n-d, k) / C(n, k)
        return math.exp(lg(n - d + 1) - lg(n - d - k + 1) - lg(n + 1) + lg(n - k + 1))

    def advance(self, to: float) -> None:
        dt = to - self.now
        if dt <= 0:
            return
        r = self.rate()
        if r > 0:
            self.last_rate = r
            steps = self._steps(r, dt)
            self.global_steps += steps
            if self.spec.target_steps and self.target_at is None:
                eff = self.global_steps - self.rolled_back
                if eff >= self.spec.target_steps:
                    self.target_at = to - (eff - self.spec.target_steps) / r
        bsp_stall = self.bsp is not None and not self.worker_up.all()
        self.tally.stalled_s += dt * (1.0 if bsp_stall else 1.0 - self.avoid_down())
        self.tally.shard_down_s += dt * len(self.down_since)
        self.now = to

    def _steps(self, r: float, dt: float) -> float:
        """Advance every stepping worker by its share of the cluster rate over `dt`, one numpy
        stroke: async workers drift apart (a renewal count's spread: mean n, variance n cv^2 for
        steps whose time has squared coefficient of variation cv^2); BSP workers move together."""
        up = self.worker_up
        k = int(up.sum())
        n = r * dt / k
        if self.bsp is not None or self.cv2 == 0:
            self.worker_steps[up] += n
            return n * k
        if n < 10:      # a few steps each: counts are whole (a floored normal would bias them up)
            got = self.rng.poisson(n, k).astype(float)
        else:
            got = np.maximum(0.0, n + math.sqrt(n * self.cv2) * self.rng.standard_normal(k))
        self.worker_steps[up] += got
        return float(got.sum())

    def tick(self) -> None:
        """A progress sample every `tick_s` of simulated time (the series the report plots and a
        restore reads its checkpoint's seq from)."""
        self.series.append((self.now, self.global_steps))
        self.at(self.now + self.tick_s, "tick")

    def steps_at(self, t: float) -> float:
        """Global acked steps at a past moment, interpolated between progress samples."""
        pts = self.series
        if t >= pts[-1][0]:
            t0, g0 = pts[-1]
            t1, g1 = self.now, self.global_steps
        else:
            i = bisect.bisect_right(pts, (t, math.inf))
            (t0, g0), (t1, g1) = pts[max(i - 1, 0)], pts[i]
        return g0 if t1 <= t0 else g0 + (g1 - g0) * (t - t0) / (t1 - t0)

    def head(self, s: int) -> int:
        return int(self.global_steps - self.offset[s])

    def sync_copies(self, sh: Shard) -> None:
        """In-sync copies hold the head (the ack rule waited for them)."""
        h = self.head(sh.index)
        for c in sh.copies:
            if c.up and c.in_sync:
                c.seq = h

    def stop_acks(self, s: int) -> None:
        self.down_since.setdefault(s, self.now)

    def resume_acks(self, s: int) -> None:
        self.down_since.pop(s, None)

    # the run ----------------------------------------------------------------------------------
    def run(self) -> dict:
        wall0 = time.monotonic()
        from . import handlers
        self._first_failures()
        self.at(self.tick_s, "tick")
        self.at(self.end, "end")
        next_say = wall0 + 2.0
        while self.heap:
            t, _, kind, args = heapq.heappop(self.heap)
            self.advance(t)
            self.events += 1
            if kind == "end":
                break
            if kind == "tick":
                self.tick()
            else:
                getattr(handlers, kind.replace("-", "_"))(self, *args)
            if self.say and time.monotonic() > next_say:
                next_say = time.monotonic() + 2.0
                self.say(f"scale: {self.now / H:.1f}/{self.spec.hours:g} simulated h, {self.events} events, "
                         f"{self.global_steps:.3g} steps")
        self.series.append((self.now, self.global_steps))
        from .summary import summary
        return summary(self, time.monotonic() - wall0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def mean_step_s(run: ScaleRun) -> float:
    return run.bsp if run.bsp is not None else mean_step(run.t)
