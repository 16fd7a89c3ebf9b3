"""The scale level's event loop: discrete events for what changes the cluster, vectorized steps
between them.

Events: a host fails or is repaired, a failover or restore completes, a copy is caught up, a
replica suspects a live primary (lost heartbeats), explicit faults from a schedule, and a
progress tick. Between two events the cluster's shape is fixed, so the training advances in one
stroke: every stepping worker's step count moves by its share of the cluster rate over the
interval (a numpy vector over the workers), and each shard's acked pushes by the share of steps
that touch it, while it acks. A step that needs a shard that does not ack blocks its worker
(psnodes' client retries it): with a dense model every step needs every shard, so the cluster
stalls at once; with `shards_per_step` k of n, a worker gets through a step with the chance p
that its k shards miss the down ones, so the stepping fraction decays as p^(t / step) into the
outage. BSP also stalls while any worker is down (psnodes has no barrier membership yet).

Random draws come from one seed, split (numpy SeedSequence) into a stream per purpose: server
failures, worker failures, step counts, and the rest. The same seed gives the same result, and
changing the workers does not move the servers' failure times.
"""
from __future__ import annotations

import heapq
import itertools
import math
import resource
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from pschaos.psnodes.core.promotion import Position

from pschaos.harness.backends.sim.calibration import Calibration
from pschaos.harness.backends.sim.scale.params import ScaleSpec, Timings, barrier_step, false_suspicion_rate, mean_step, step_rate, timings
from pschaos.harness.backends.sim.scale import handlers
from pschaos.harness.backends.sim.scale.shards import Shard
from pschaos.harness.backends.sim.scale.state import Tally
from pschaos.harness.backends.sim.scale.summary import summary

H = 3600.0


def peak_rss_kb() -> int:
    """This process's peak resident memory: VmHWM (its own address space's high-water mark;
    getrusage's ru_maxrss survives an exec, so a child started by a big parent reads the parent's)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class ScaleRun:
    def __init__(self, spec: ScaleSpec, cal: Calibration, progress: Callable[[str], None] | None = None,
                 cal_path: str | None = None) -> None:
        spec.check()
        self.spec, self.cal, self.say, self.cal_path = spec, cal, progress, cal_path
        self.t: Timings = timings(spec, cal)
        streams = np.random.SeedSequence(spec.seed).spawn(4)
        self.server_rng, self.worker_rng, self.step_rng, self.misc = (np.random.default_rng(x) for x in streams)
        self.now, self.end = 0.0, spec.hours * H
        self.heap: list = []
        self.seq = itertools.count()
        self.events = 0
        n = spec.shards
        self.shards = [Shard.new(i, spec.copies, spec.replication, spec.isr_floor) for i in range(n)]
        self.down_since: dict[int, float] = {}        # shard -> when it stopped acking
        self.outage_since: float | None = None        # since when some shard does not ack
        self.acked = np.zeros(n)                      # each shard's acked pushes: its head seq
        self.worker_up = np.ones(spec.workers, dtype=bool)
        self.worker_life = np.zeros(spec.workers, dtype=np.int64)
        self.worker_steps = np.zeros(spec.workers)
        self.global_steps = 0.0
        self.series: list[tuple[float, float]] = [(0.0, 0.0)]
        # checkpoints: shard s publishes every checkpoint_interval_s from its own phase while it acks
        ci = spec.checkpoint_interval_s
        self.ck_phase = (np.arange(n) * 0.6180339887 % 1.0) * ci
        self.ck_seq = np.full(n, -1.0)
        self.ck_epoch = np.zeros(n, dtype=np.int64)
        self.prev_t, self.prev_acked = 0.0, np.zeros(n)
        self.tally = Tally()
        self.target_at: float | None = None
        self.bsp = barrier_step(self.t, spec.workers, self.misc) if spec.training == "bsp" else None
        self.cv2 = math.exp(self.t.jitter ** 2) - 1
        self.last_rate = 0.0
        self._rates: dict[int, float] = {}     # stepping workers -> base_rate (the timings are fixed)
        self.tick_s = max(1.0, min(60.0, self.end / 500))
        self.suspect_rate = false_suspicion_rate(spec) * max(spec.copies - 1, 0)
        # etcd: while it is down no election or restore completes; once it was silent for a lease
        # (less psnodes' margin) no primary may ack (pschaos.psnodes.core.lease.valid)
        self.etcd_up, self.lease_ok, self.etcd_life = True, True, 0
        self.deferred: list[tuple[str, tuple]] = []

    # scheduling ------------------------------------------------------------------------------
    def at(self, t: float, kind: str, *args: Any) -> None:
        if t <= self.end:
            heapq.heappush(self.heap, (t, next(self.seq), kind, args))

    def draw_failure(self, server: bool) -> float | None:
        f = self.spec.failures
        d = f.server_mtbf_h if server else f.worker_mtbf_h
        return None if d is None else float(d.draw(self.server_rng if server else self.worker_rng, None, H))

    def draw_repair(self, server: bool) -> float:
        f = self.spec.failures
        return float((f.server_repair_s if server else f.worker_repair_s).draw(
            self.server_rng if server else self.worker_rng))

    def _first_failures(self) -> None:
        f, n = self.spec.failures, self.spec
        if f.worker_mtbf_h is not None:
            for j, dt in enumerate(f.worker_mtbf_h.draw(self.worker_rng, n.workers, H)):
                self.at(float(dt), "worker-fail", j, 0)
        if f.server_mtbf_h is not None:
            draws = f.server_mtbf_h.draw(self.server_rng, n.shards * n.copies, H)
            for k, dt in enumerate(draws):
                self.at(float(dt), "server-fail", k // n.copies, k % n.copies, 0)
        if f.etcd_mtbf_h is not None:
            self.at(float(f.etcd_mtbf_h.draw(self.misc, None, H)), "etcd-fail", 0)
        if self.suspect_rate > 0:
            for s in range(n.shards):
                self.at(float(self.misc.exponential(1 / self.suspect_rate)), "suspect", s)
        for f_ in n.schedule:
            self.at(float(f_["at_s"]), "scheduled", f_)

    # progress --------------------------------------------------------------------------------
    def avoid_down(self) -> float:
        """The chance that a step's shards miss every shard that does not ack now (hypergeometric)."""
        d, n, k = len(self.down_since), self.spec.shards, self.t.touched
        if d == 0:
            return 1.0
        if n - d < k:
            return 0.0
        lg = math.lgamma      # C(n-d, k) / C(n, k)
        return math.exp(lg(n - d + 1) - lg(n - d - k + 1) - lg(n + 1) + lg(n - k + 1))

    def stepping(self, a: float, b: float) -> float:
        """The mean fraction of workers stepping over [a, b]: p^(tau / step) into an outage."""
        p = self.avoid_down()
        if p >= 1.0 or self.outage_since is None:
            return 1.0
        if p <= 0.0:
            return 0.0
        step, lp = mean_step(self.t), math.log(p)
        ta, tb = a - self.outage_since, b - self.outage_since
        return step / lp * (p ** (tb / step) - p ** (ta / step)) / (b - a)

    def base_rate(self) -> float:
        """Cluster steps per second with every shard acking (0 while BSP misses a worker)."""
        up = int(self.worker_up.sum())
        if self.bsp is not None and up < self.spec.workers:
            return 0.0
        if up not in self._rates:            # a bisection: once per count of stepping workers
            self._rates[up] = step_rate(self.t, up, self.bsp)
        return self._rates[up]

    def advance(self, to: float) -> None:
        dt = to - self.now
        if dt <= 0:
            return
        base = self.base_rate()
        frac = self.stepping(self.now, to)
        r = base * frac
        if r > 0:
            self.last_rate = base
            steps = self._steps(r, dt)
            self.global_steps += steps
            live = np.ones(self.spec.shards, dtype=bool)
            if self.down_since:
                live[list(self.down_since)] = False
            self.acked[live] += steps * self.t.touch
            self._check_target(to, r)
        self.tally.stalled_s += dt * (1.0 - (frac if base > 0 else 0.0))
        self.tally.shard_down_s += dt * len(self.down_since)
        self.now = to

    def _check_target(self, to: float, r: float) -> None:
        if self.spec.target_steps and self.target_at is None:
            eff = self.effective_steps()
            if eff >= self.spec.target_steps:
                self.target_at = to - (eff - self.spec.target_steps) / (r or 1.0)

    def effective_steps(self) -> float:
        """Training progress in steps: each shard's acked pushes (less what restores and async
        failovers lost) over the pushes a step makes to it, averaged over the shards."""
        return float(self.acked.mean() / self.t.touch)

    def _steps(self, r: float, dt: float) -> float:
        """Advance every stepping worker by its share of the cluster rate over `dt`, one numpy
        stroke: async workers drift apart (a renewal count's spread: mean n, variance n cv^2 for
        steps whose time has squared coefficient of variation cv^2); BSP workers move together."""
        up = self.worker_up
        k = int(up.sum())
        if k == 0:
            return 0.0
        n = r * dt / k
        if self.bsp is not None or self.cv2 == 0:
            self.worker_steps[up] += n
            return n * k
        if n < 10:      # a few steps each: counts are whole (a floored normal would bias them up)
            got = self.step_rng.poisson(n, k).astype(float)
        else:
            got = np.maximum(0.0, n + math.sqrt(n * self.cv2) * self.step_rng.standard_normal(k))
        self.worker_steps[up] += got
        return float(got.sum())

    def tick(self) -> None:
        """A progress sample every `tick_s`, and the checkpoints published since the last one."""
        self.tally.ticks += 1
        self.series.append((self.now, self.global_steps))
        ci, n = self.spec.checkpoint_interval_s, self.spec.shards
        upto = np.full(n, self.now)
        for s, t0 in self.down_since.items():
            upto[s] = t0
        t_ck = np.floor((upto - self.ck_phase) / ci) * ci + self.ck_phase
        new = (t_ck > self.prev_t) & (t_ck > 0)
        if new.any():
            span = max(self.now - self.prev_t, 1e-12)
            val = self.prev_acked + (t_ck - self.prev_t) / span * (self.acked - self.prev_acked)
            self.ck_seq[new] = np.floor(val[new])
            self.ck_epoch[new] = [self.shards[s].epoch for s in np.flatnonzero(new)]
        self.prev_t, self.prev_acked = self.now, self.acked.copy()
        self.at(self.now + self.tick_s, "tick")

    def checkpoint_of(self, s: int) -> Position | None:
        """The shard's newest checkpoint now (published while it acked; a copy's local checkpoint
        is taken on the same beat), as (epoch, seq)."""
        ci = self.spec.checkpoint_interval_s
        upto = self.down_since.get(s, self.now)
        t_ck = math.floor((upto - self.ck_phase[s]) / ci) * ci + self.ck_phase[s]
        if t_ck > self.prev_t and t_ck > 0:
            span = max(self.now - self.prev_t, 1e-12)
            seq = self.prev_acked[s] + (t_ck - self.prev_t) / span * (self.acked[s] - self.prev_acked[s])
            return Position(self.shards[s].epoch, int(seq))
        if self.ck_seq[s] < 0:
            return None
        return Position(int(self.ck_epoch[s]), int(self.ck_seq[s]))

    def head(self, s: int) -> int:
        return int(self.acked[s])

    def lose(self, s: int, n: int) -> None:
        """Acked pushes gone from shard s: its head goes back, and no checkpoint is above it."""
        if n <= 0:
            return
        self.acked[s] = max(0.0, self.acked[s] - n)
        self.prev_acked[s] = min(self.prev_acked[s], self.acked[s])
        self.ck_seq[s] = min(self.ck_seq[s], self.acked[s])
        self.tally.lost_acked_updates += n

    def async_lag(self) -> float:
        """Entries of one shard in flight to its replicas: its push rate times one replicate
        call's time (the message, its answer, the replica's apply, and the sender's and replica's
        CPU for the call, as the per-RPC twin charges them)."""
        return self.last_rate * self.t.touch * (self.t.rep_fixed_s + self.t.rep_entry_s)

    def sync_copies(self, sh: Shard) -> None:
        """In-sync copies hold the head (the ack rule waited for them)."""
        h = self.head(sh.index)
        for c in sh.copies:
            if c.up and c.in_sync:
                c.seq = h

    def stop_acks(self, s: int) -> None:
        if s not in self.down_since:
            self.down_since[s] = self.now
            if self.outage_since is None:
                self.outage_since = self.now

    def resume_acks(self, s: int) -> None:
        if self.down_since.pop(s, None) is not None and not self.down_since:
            self.outage_since = None

    # the run ----------------------------------------------------------------------------------
    def run(self) -> dict:
        wall0 = time.monotonic()
        self._first_failures()
        self.at(self.tick_s, "tick")
        self.at(self.end, "end")
        next_say = wall0 + 2.0
        while self.heap:
            t, _, kind, args = heapq.heappop(self.heap)
            self.advance(t)
            if kind == "end":
                break
            if kind == "tick":
                self.tick()
            else:
                self.events += 1
                getattr(handlers, kind.replace("-", "_"))(self, *args)
            if self.say and time.monotonic() > next_say:
                next_say = time.monotonic() + 2.0
                self.say(f"scale: {self.now / H:.1f}/{self.spec.hours:g} simulated h, {self.events} events, "
                         f"{self.global_steps:.3g} steps")
        return summary(self, time.monotonic() - wall0, peak_rss_kb())
