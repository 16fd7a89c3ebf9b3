"""What a scale run simulates (ScaleSpec) and the timings it derives from the calibration.

The step, wire and apply times are the per-RPC twin's, read from the same calibration file
(harness/sim/calibration.py), so both levels agree where both run. What only this level has:
a shard primary is a server with a finite rate (each push costs it the apply time of its share
of the model and its bytes through the host's network), so a cluster with more workers than its
shards can serve bends its throughput curve instead of scaling forever; the per-RPC twin at
calibration scale never gets near that limit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, asdict
from typing import Any

import numpy as np

from psnodes.config import ClusterConfig as Config

from ...errors import HarnessError
from ..calibration import Calibration
from .failures import Failures, PRESETS

MODEL_BYTES = {"mlp": 5313 * 4, "widedeep": 4 * 100_000}   # float32 parameters a step moves (dense part)
DEFAULTS = Config(cluster_id="scale", etcd="")      # the defaults psnodes runs with


@dataclass
class ScaleSpec:
    """One scale run. Times in seconds unless the name says hours."""

    workers: int = 64
    shards: int = 16
    copies: int = 3
    hours: float = 1.0
    seed: int = 1
    model: str = "mlp"
    replication: str = "sync"
    training: str = "async"
    param_mb: float | None = None          # the model's size; None: the calibrated model's own
    shards_per_step: int | None = None     # shards one step pulls from and pushes to (None: all, a dense model)
    failures: Failures = field(default_factory=lambda: PRESETS["llama3"])
    heartbeat_s: float = DEFAULTS.heartbeat_s
    suspect_s: float = DEFAULTS.suspect_s
    candidate_window_s: float = DEFAULTS.candidate_window_s
    lease_ttl_s: float = float(DEFAULTS.lease_ttl_s)
    checkpoint_interval_s: float = 60.0
    heartbeat_loss: float = 0.0            # chance a heartbeat's packet is lost (false suspicions)
    target_steps: int | None = None        # global steps to the target loss (None: not asked)
    max_lag: int = DEFAULTS.max_lag
    schedule: list[dict] = field(default_factory=list)   # explicit faults: {at_s, kind, target}

    def check(self) -> None:
        for f in ("workers", "shards", "copies"):
            if not isinstance(getattr(self, f), int) or getattr(self, f) < 1:
                raise HarnessError(f"{f}={getattr(self, f)!r} must be a whole number >= 1")
        if not self.hours > 0:
            raise HarnessError(f"hours={self.hours!r} must be > 0 (e.g. --hours 24)")
        if self.model not in MODEL_BYTES:
            raise HarnessError(f"model={self.model!r}: use one of {sorted(MODEL_BYTES)}")
        if self.replication not in ("sync", "async") or self.training not in ("async", "bsp"):
            raise HarnessError(f"replication={self.replication!r} / training={self.training!r}: use sync|async "
                               f"and async|bsp (SSP is not modelled at this level)")
        if self.shards_per_step is not None and not 1 <= self.shards_per_step <= self.shards:
            raise HarnessError(f"shards_per_step={self.shards_per_step!r} must be between 1 and shards={self.shards} "
                               f"(leave it out for a dense model: every step touches every shard)")
        if self.param_mb is not None and not self.param_mb > 0:
            raise HarnessError(f"param_mb={self.param_mb!r} must be > 0 (megabytes of parameters)")
        for f in ("heartbeat_s", "suspect_s", "checkpoint_interval_s"):
            if not getattr(self, f) > 0:
                raise HarnessError(f"{f}={getattr(self, f)!r} must be > 0")
        if not 0 <= self.heartbeat_loss < 1:
            raise HarnessError(f"heartbeat_loss={self.heartbeat_loss!r} must be in [0, 1)")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["failures"] = self.failures.to_json()
        return d

    @property
    def touched(self) -> int:
        """Shards one step touches."""
        return self.shards_per_step or self.shards

    @property
    def min_isr(self) -> int:
        return 2 if self.copies >= 3 else 1


@dataclass(frozen=True)
class Timings:
    """Seconds, from the calibration and the spec."""

    step_s: float              # a worker's step: compute, overhead and the wire (median)
    jitter: float              # log-sd of a step
    shard_bytes: float         # the bytes of one shard's share of a step's push (and of its pull)
    msg_s: float               # one message of shard_bytes one way
    service_s: float           # a primary's work per push it serves: request CPU, apply, the host's bytes
    touch: float               # the fraction of shards one step touches (1: dense)
    detect_s: float            # silence before a replica suspects (mean heartbeat phase added per draw)
    elect_s: float             # candidate window and the etcd round trips of an election
    rediscover_s: float        # a client's routing read and push once its retry finds the new primary
    restart_s: float           # a repaired host's copy until it serves
    per_byte_s: float
    fixed_s: float
    repl_s: float              # primary -> replicas and back (sync acks wait for it)


def timings(spec: ScaleSpec, cal: Calibration) -> Timings:
    net = cal.network or {}
    fixed, per_byte = float(net.get("fixed_s", 1e-4)), float(net.get("per_byte_s", 4e-10))
    total = spec.param_mb * 1e6 if spec.param_mb else MODEL_BYTES[spec.model]
    shard_bytes = total / spec.shards
    msg = fixed + per_byte * shard_bytes
    small = fixed
    repl = (msg + small) if spec.replication == "sync" else 0.0
    # pull and push: each a request and a reply per shard, the shards' calls in parallel
    wire = 2 * (msg + small) + repl
    step = cal.step_s(spec.model, spec.replication, spec.training) + wire
    apply = cal.apply_s_per_mb * shard_bytes / 1e6
    # a request's own cost at the server (gRPC and protobuf CPU: the calibrated fixed cost of a
    # message) plus the apply of its share of the model and its bytes in and out of the host
    service = fixed + apply + 2 * per_byte * shard_bytes
    elect = spec.candidate_window_s + 2 * cal.etcd_write_s + cal.etcd_read_s + 4 * fixed
    return Timings(step_s=step, jitter=cal.jitter(spec.model, spec.replication, spec.training),
                   shard_bytes=shard_bytes, msg_s=msg, service_s=service, touch=spec.touched / spec.shards,
                   detect_s=spec.suspect_s,
                   elect_s=elect, rediscover_s=cal.etcd_read_s + msg + small,
                   restart_s=cal.node_start_s, per_byte_s=per_byte, fixed_s=fixed, repl_s=repl)


def mean_step(t: Timings) -> float:
    """The mean of a jittered step (the calibration's step is the median of a lognormal)."""
    return t.step_s * math.exp(t.jitter ** 2 / 2)


def barrier_step(t: Timings, workers: int, rng: np.random.Generator, draws: int = 64) -> float:
    """BSP: a step lasts as long as its slowest worker: the mean of the max of `workers` draws."""
    if t.jitter == 0 or workers == 1:
        return mean_step(t)
    per = min(workers, 200_000 // draws + 1)
    m = np.exp(t.jitter * rng.standard_normal((draws, per))).max(axis=1)
    if per < workers:     # the max of more draws: the lognormal's quantile at workers/(workers+1)
        from statistics import NormalDist
        m = np.full(draws, math.exp(t.jitter * NormalDist().inv_cdf(workers / (workers + 1))))
    return float(t.step_s * m.mean())


def step_rate(t: Timings, up: int, bsp_step: float | None = None) -> float:
    """Cluster-wide worker steps per second with `up` workers stepping: a step costs each shard
    primary it touches `service_s` (a `touch` fraction of them, spread evenly), so a primary is a
    single server; the wait at it follows M/D/1 (mean wait rho s / (2 (1 - rho))), solved for the
    step time by bisection. Saturated, the cluster runs at the primaries' rate."""
    if up <= 0:
        return 0.0
    base = bsp_step if bsp_step is not None else mean_step(t)
    s = t.service_s * t.touch
    if s <= 0:
        return up / base
    cap = 1.0 / s

    w = t.service_s        # one request's time at its primary

    def excess(step: float) -> float:
        rho = min(up / step * s, 0.999999)
        return base + w + rho * w / (2 * (1 - rho)) - step
    lo, hi = base, max(base * 2, up * s * 4 + base)
    if excess(hi) > 0:
        return cap
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return min(up / hi, cap)


def retry_at(elapsed: float, attempt_s: float) -> float:
    """When a client that lost its primary `elapsed` ago gets through (psnodes.client.call): it
    retries after 10 ms, doubling to 100 ms, each attempt costing `attempt_s`; the first attempt
    at or after `elapsed` (the moment the new primary serves) reaches it."""
    t, delay = 0.0, 0.01
    while t < elapsed:
        t += delay + attempt_s
        delay = min(delay * 2, 0.1)
    return t


def false_suspicion_rate(spec: ScaleSpec, rto_s: float = 0.2) -> float:
    """Spurious suspicions per second of one replica: heartbeats ride TCP, so a lost one is
    retransmitted after an RTO that doubles; the replica suspects once the silence since the last
    heartbeat reaches suspect_s, i.e. after m losses in a row with hb + rto (2^m - 1) >= suspect."""
    p = spec.heartbeat_loss
    if p <= 0:
        return 0.0
    m = 1
    while spec.heartbeat_s + rto_s * (2 ** m - 1) < spec.suspect_s:
        m += 1
    return p ** m / spec.heartbeat_s
