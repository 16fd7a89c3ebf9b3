"""What a scale run simulates (ScaleSpec) and the timings it derives from the calibration.

The step, wire and apply times are the per-RPC twin's, read from the same calibration file
(harness/backends/sim/calibration.py), so both levels agree where both run. What only this level has:
a shard primary is a server with a finite rate (each push costs it the apply time of its share
of the model and its bytes through the host's network), so a cluster with more workers than its
shards can serve bends its throughput curve instead of scaling forever; the per-RPC twin at
calibration scale never gets near that limit.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from pschaos.psnodes.core import retry
from pschaos.psnodes.core.detector import DETECTORS
from pschaos.psnodes.placement import AUDIT_BUCKETS, AUDIT_SLOTS
from pschaos.psnodes.config import ClusterConfig as Config

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.sim.calibration import Calibration, wake_after
from pschaos.harness.backends.sim.scale.failures import Failures, PRESETS
from pschaos.harness.backends.sim.scale.pipeline import sync_wait_s

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
    detector: str = DEFAULTS.detector      # psnodes' failure detector: "phi" (floor, probe) or "fixed"
    candidate_window_s: float = DEFAULTS.candidate_window_s
    lease_ttl_s: float = float(DEFAULTS.lease_ttl_s)
    checkpoint_interval_s: float = 60.0
    heartbeat_loss: float = 0.0            # chance a heartbeat's packet is lost (false suspicions)
    target_steps: int | None = None        # global steps to the target loss (None: not asked)
    max_lag: int = DEFAULTS.max_lag
    min_isr: int | None = None             # sync acks need this many in-sync copies (None: psnodes' rule)
    server_request_s: float | None = None  # a primary's CPU per request (None: a calibrated Echo round trip)
    schedule: list[dict] = field(default_factory=list)   # explicit faults: {at_s, kind, target}

    def check(self) -> None:
        check(self, MODEL_BYTES)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["failures"] = self.failures.to_json()
        return d

    @property
    def touched(self) -> int:
        """Shards one step touches."""
        return self.shards_per_step or self.shards

    @property
    def isr_floor(self) -> int:
        """min_isr as psnodes sets it when not given: 2 with 3 or more copies, else 1."""
        return self.min_isr or (2 if self.copies >= 3 else 1)


@dataclass(frozen=True)
class Timings:
    """Seconds, from the calibration and the spec."""

    step_s: float              # a worker's step: compute, overhead and the wire (median)
    jitter: float              # log-sd of a step
    shard_bytes: float         # the bytes of one shard's share of a step's push (and of its pull)
    msg_s: float               # one message of shard_bytes one way
    service_s: float           # a primary's work per step that touches it (see timings)
    touch: float               # the fraction of shards one step touches (1: dense)
    touched: int               # how many shards one step touches
    elect_s: float             # the etcd round trips of an election (the window closes once all posted)
    gap_s: float               # the mean gap between a primary's calls to a replica (replicates, heartbeats)
    detect_s: float            # the silence after which a replica suspects (pschaos.psnodes.core.detector)
    probe_s: float             # a suspecting replica's probe of a killed primary (calibration probe_refused_s)
    rediscover_s: float        # a client's routing read and push once its retry finds the new primary
    restart_s: float           # a repaired host's copy until it serves
    per_byte_s: float
    fixed_s: float
    apply_s: float             # applying one push's share of the model
    think_s: float = 0.0       # the part of step_s outside the calls: compute, overhead, the worker's call CPU
    teardown_s: float = 0.0    # a killed host's calls in flight fail this long after it (kill_teardown_s)
    retry_s: float = 0.0       # a client's retry beyond its pause: the record read, then its call to
                               # the dead primary failing
    rep_fixed_s: float = 0.0   # a Replicate's time whatever it carries: the wire both ways, both ends' CPU
    rep_entry_s: float = 0.0   # and per entry it carries: the bytes, the replica's apply
    sync_waits: bool = False   # sync replication and async training: workers wait on each other's replication
    seed: int = 1


def audit_bytes(spec: ScaleSpec) -> float:
    """What psnodes' client adds to a shard's share of a push (psnodes/client/client.py `_add_audit`): the
    shard's audit tensor and the migrating audit buckets it owns, AUDIT_SLOTS float32s each, from
    the workers that have an audit slot (the first AUDIT_SLOTS), so a mean over the workers. The
    calibrated mlp's 21 kB a step travel with 29 kB of them."""
    tensors = 1 + AUDIT_BUCKETS / spec.shards
    return tensors * AUDIT_SLOTS * 4 * min(1.0, AUDIT_SLOTS / spec.workers)


def timings(spec: ScaleSpec, cal: Calibration) -> Timings:
    """A primary's work per step that touches it: a pull and a push, and a replicate call to each
    other copy, each costing `server_request_s` of CPU (default: the calibration's, measured on a
    real primary; a calibration without it: the Echo round trip), plus the apply of its share of
    the model and those bytes through its host."""
    net = cal.network or {}
    fixed, per_byte = float(net.get("fixed_s", 1e-4)), float(net.get("per_byte_s", 4e-10))
    total = spec.param_mb * 1e6 if spec.param_mb else MODEL_BYTES[spec.model]
    shard_bytes = total / spec.shards + audit_bytes(spec)
    msg = fixed + per_byte * shard_bytes
    small = fixed
    repl = (msg + small) if spec.replication == "sync" else 0.0
    # pull and push: each a request and a reply per shard, the shards' calls in parallel
    wire = 2 * (msg + small) + repl
    apply = cal.apply_s_per_mb * shard_bytes / 1e6
    rep_request, rep_per_mb, rep_send = cal.replicate_cpu()
    # a Replicate's CPU (calibration replicate_*: the sender's and the replica's, cpu.py's charges);
    # the primary's senders take turns under its GIL, so the last copy's call leaves after every send
    rep_sends = (spec.copies - 1) * rep_send
    # and what real copies spend per push beyond the calls (calibration push_cpu_extra_s, replicate_
    # cpu_extra_s): the per-RPC twin charges them on the primary's push and each replica's Replicate
    push_x, rep_x = cal.copy_cpu_extra(spec.model, spec.replication, spec.training)
    rep_request += rep_x
    replicate_cpu = rep_sends + rep_request + rep_per_mb * shard_bytes / 1e6
    # on a push's path: the primary's apply, then (sync) the Replicate's CPU at both ends
    wire += apply + push_x + (replicate_cpu if spec.replication == "sync" else 0.0)
    # the worker's own CPU per call (calibration client_request_s, under its GIL, and side by side
    # with it client_cpu_extra_s, what a real worker spends per call under load beyond that, outside
    # the GIL: a call waits for the longer): a pull and a push per shard it touches, one after
    # another (as the per-RPC twin charges them on an unshared host, cpu.py io_line)
    per_call = max(cal.client_request_s, cal.client_cpu_extra(spec.model, spec.replication, spec.training))
    client = per_call * 2 * spec.touched
    think = cal.step_s(spec.model, spec.replication, spec.training) + client
    step = think + wire
    req = next(v for v in (spec.server_request_s, cal.server_request_s, 2 * fixed) if v is not None)
    calls = 2 + (spec.copies - 1)          # pull, push, and the push's replicate calls (async too, later)
    # and the primary's own CPU to send each replicate call (replicate_send_s, under its GIL too)
    # and its CPU per push beyond the calls (push_x); server_request_s=0 turns the primary's whole
    # CPU queue off
    send = rep_sends + push_x if req > 0 else 0.0
    service = calls * req + send + apply + (2 + spec.copies - 1) * per_byte * shard_bytes
    # the record read, the candidacy put, the candidates' read and the compare-and-swap; the
    # candidate window closes as soon as every ISR copy that may stand posted
    # (pschaos.psnodes.core.promotion.all_posted), which replicas of one stream do at once (see
    # primary_lost); the first of them finds etcd idle since the clients' last retry read
    elect = 2 * cal.etcd_write_s + 2 * cal.etcd_read_s + 4 * fixed + wake_after(cal.etcd_wake_s, retry.FAST_CAP_S)
    # each retry re-reads the shard record, finding etcd idle since the last retry's read, then
    # calls the old primary (the worker's CPU for a call, its request's wire), which fails it
    retry_s = 2 * fixed + cal.etcd_read_s + wake_after(cal.etcd_wake_s, retry.FAST_CAP_S) + per_call + fixed
    # the phi replica's probe of the killed primary: the request's wire, then gRPC's failure path
    probe_s = fixed + float(net["probe_refused_s"]) if "probe_refused_s" in net else 2 * fixed
    step_mean = step * math.exp(cal.jitter(spec.model, spec.replication, spec.training) ** 2 / 2)
    gap = min(spec.heartbeat_s, step_mean / (spec.workers * spec.touched / spec.shards))
    return Timings(step_s=step, jitter=cal.jitter(spec.model, spec.replication, spec.training),
                   shard_bytes=shard_bytes, msg_s=msg, service_s=service, touch=spec.touched / spec.shards,
                   touched=spec.touched, elect_s=elect, gap_s=gap, detect_s=suspicion_s(spec, gap),
                   probe_s=probe_s if spec.detector == "phi" else 0.0, teardown_s=cal.kill_teardown_s or 0.0,
                   retry_s=retry_s, rediscover_s=cal.etcd_read_s + msg + small,
                   restart_s=cal.node_start_s, per_byte_s=per_byte, fixed_s=fixed, apply_s=apply,
                   think_s=think, rep_fixed_s=2 * fixed + rep_sends + rep_request,
                   rep_entry_s=(per_byte + rep_per_mb / 1e6) * shard_bytes,
                   sync_waits=spec.replication == "sync" and spec.training == "async",
                   seed=spec.seed)


def mean_step(t: Timings) -> float:
    """The mean of a jittered step (the calibration's step is the median of a lognormal)."""
    return t.step_s * math.exp(t.jitter ** 2 / 2)


def replication_wait(t: Timings, up: int) -> float:
    """What a step waits on other workers' replication (sync, async training: pipeline.py) with
    `up` of the cluster's workers stepping; 0 otherwise (async replication acks before it, BSP's
    barrier is not modelled so)."""
    if not t.sync_waits or up <= 1:
        return 0.0
    on_shard = max(1, round(up * t.touch))       # the workers whose steps touch one shard
    return sync_wait_s(on_shard, 1 if t.touch >= 1 else t.touched, t.think_s, t.jitter, t.fixed_s, t.msg_s,
                       t.apply_s, t.rep_fixed_s, t.rep_entry_s, t.seed)


def barrier_step(t: Timings, workers: int, rng: np.random.Generator, draws: int = 256) -> float:
    """BSP: a step lasts as long as its slowest worker. The max of `workers` standard normals has
    the distribution of inv_cdf(U^(1/workers)), so the mean of the max is drawn exactly for any
    count, and grows with it."""
    if t.jitter == 0 or workers == 1:
        return mean_step(t)
    nd = NormalDist()
    u = np.minimum(rng.random(draws) ** (1.0 / workers), 1 - 1e-16)
    z = np.array([nd.inv_cdf(float(x)) for x in u])
    return float(t.step_s * np.exp(t.jitter * z).mean())


def harmonic(k: int) -> float:
    """H_k: the mean of the largest of k unit exponentials (a step waits for its slowest shard)."""
    return sum(1.0 / i for i in range(1, min(k, 10_000) + 1)) if k < 10_000 else math.log(k) + 0.5772


def step_rate(t: Timings, up: int, bsp_step: float | None = None) -> float:
    """Cluster-wide worker steps per second with `up` workers stepping. Each touched primary is a
    single server with `service_s` a step (already inside the calibrated step, which measured an
    idle cluster), so only its queue adds time: M/D/1's mean wait rho s / (2 (1 - rho)), times
    H_k for a step that waits on the slowest of its k shards (fork-join, as exponentials); the
    step time is solved by bisection. Saturated, the cluster runs at the primaries' rate. In
    sync mode (async training) a step also waits on the other workers' replication
    (`replication_wait`, pipeline.py), which the calibrated step does not hold: the twin it was
    measured against runs that pipeline itself."""
    if up <= 0:
        return 0.0
    base = bsp_step if bsp_step is not None else mean_step(t) + replication_wait(t, up)
    s = t.service_s * t.touch          # per cluster step, at each primary
    if s <= 0:
        return up / base
    cap = 1.0 / s
    w, fan = t.service_s, harmonic(t.touched)

    def excess(step: float) -> float:
        rho = min(up / step * s, 0.999999)
        return base + fan * rho * w / (2 * (1 - rho)) - step
    lo, hi = base, max(base * 2, up * s * 4 + base)
    if excess(hi) > 0:
        return cap
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return min(up / hi, cap)


def retry_at(elapsed: float, attempt_s: float) -> float:
    """When a client that lost its primary `elapsed` ago gets through (pschaos.psnodes.client.shard_calls.ShardCalls.call): it
    retries on pschaos.psnodes.core.retry's schedule, each attempt costing `attempt_s`; the first attempt
    at or after `elapsed` (the moment the new primary serves) reaches it."""
    t, delay = 0.0, retry.FIRST_S
    while t < elapsed:
        t += delay + attempt_s
        delay = retry.next_delay(delay, t)
    return t


def suspicion_s(spec: ScaleSpec, gap_s: float) -> float:
    """The silence after which a replica suspects its primary: psnodes' own detector
    (pschaos.psnodes.core.detector, built from the config psnodes runs with) after a window of steady
    gaps of `gap_s`. Phi: mean + pause + z sigma, never under the floor; fixed: suspect_s."""
    cfg = replace(DEFAULTS, heartbeat_s=spec.heartbeat_s, suspect_s=spec.suspect_s, detector=spec.detector)
    d = cfg.failure_detector()
    for i in range(cfg.phi_window + 1):
        d.heard(i * gap_s)
    return d.silence_s()


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


# Every setting of a scale run checked before it runs: errors name the field, the value and the
# fix (a bad value must not become a traceback mid-run, a run that never ends, or a silent 0).
TARGET = re.compile(r"^(primary|replica)\(shard=(\d+)\)$|^shard-(\d+)/(\d+)$|^worker-(\d+)$|^etcd$")
MAX_HOURS = 24 * 366


def _finite(name: str, v: Any, low: float, low_ok: bool = False, high: float = math.inf) -> None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and \
        (v >= low if low_ok else v > low) and v <= high
    if not ok:
        bound = f">= {low:g}" if low_ok else f"> {low:g}"
        raise HarnessError(f"{name}={v!r} must be a finite number {bound}" + (f" and <= {high:g}" if high < math.inf
                                                                              else ""))


def check(spec: "ScaleSpec", model_bytes: dict) -> None:
    for f in ("workers", "shards", "copies"):
        v = getattr(spec, f)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise HarnessError(f"{f}={v!r} must be a whole number >= 1")
    if not isinstance(spec.seed, int) or isinstance(spec.seed, bool) or spec.seed < 0:
        raise HarnessError(f"seed={spec.seed!r} must be a whole number >= 0")
    _finite("hours", spec.hours, 0.0, high=MAX_HOURS)
    if spec.model not in model_bytes:
        raise HarnessError(f"model={spec.model!r}: use one of {sorted(model_bytes)}")
    if spec.replication not in ("sync", "async"):
        raise HarnessError(f"replication={spec.replication!r}: use sync or async")
    if spec.training not in ("async", "bsp"):
        raise HarnessError(f"training={spec.training!r}: use async or bsp (SSP is not modelled at this level)")
    if spec.shards_per_step is not None and not (isinstance(spec.shards_per_step, int)
                                                 and 1 <= spec.shards_per_step <= spec.shards):
        raise HarnessError(f"shards_per_step={spec.shards_per_step!r} must be between 1 and shards={spec.shards} "
                           f"(leave it out for a dense model: every step touches every shard)")
    if spec.min_isr is not None and not (isinstance(spec.min_isr, int) and 1 <= spec.min_isr <= spec.copies):
        raise HarnessError(f"min_isr={spec.min_isr!r} must be between 1 and copies={spec.copies}")
    if spec.param_mb is not None:
        _finite("param_mb", spec.param_mb, 0.0)
    for f in ("heartbeat_s", "suspect_s", "checkpoint_interval_s", "lease_ttl_s"):
        _finite(f, getattr(spec, f), 0.0)
    _finite("candidate_window_s", spec.candidate_window_s, 0.0, low_ok=True)
    if spec.server_request_s is not None:
        _finite("server_request_s", spec.server_request_s, 0.0, low_ok=True)
    if spec.detector not in DETECTORS:
        raise HarnessError(f"detector={spec.detector!r} is unknown; use 'phi' (adaptive, psnodes' default) "
                           "or 'fixed' (suspect_s of silence)")
    if spec.suspect_s <= spec.heartbeat_s:
        raise HarnessError(f"suspect_s={spec.suspect_s} must be longer than heartbeat_s={spec.heartbeat_s} "
                           f"(a replica would suspect between two heartbeats)")
    _finite("heartbeat_loss", spec.heartbeat_loss, 0.0, low_ok=True, high=0.99)
    if spec.target_steps is not None and not (isinstance(spec.target_steps, int) and spec.target_steps > 0):
        raise HarnessError(f"target_steps={spec.target_steps!r} must be a whole number > 0")
    if not isinstance(spec.max_lag, int) or spec.max_lag < 0:
        raise HarnessError(f"max_lag={spec.max_lag!r} must be a whole number >= 0")
    check_schedule(spec)


def check_schedule(spec: "ScaleSpec") -> None:
    if not isinstance(spec.schedule, list):
        raise HarnessError(f"schedule={spec.schedule!r} must be a list of {{at_s, kind, target}}")
    for i, f in enumerate(spec.schedule):
        at = f"schedule[{i}]"
        if not isinstance(f, dict) or set(f) - {"at_s", "kind", "target", "restart_after_s"}:
            raise HarnessError(f"{at}={f!r}: write {{at_s, kind: kill|restart, target, restart_after_s}}")
        _finite(f"{at}.at_s", f.get("at_s"), 0.0, low_ok=True)
        if f.get("kind") not in ("kill", "restart"):
            raise HarnessError(f"{at}.kind={f.get('kind')!r}: use kill or restart")
        if f.get("restart_after_s") is not None:
            _finite(f"{at}.restart_after_s", f["restart_after_s"], 0.0, low_ok=True)
        m = TARGET.match(str(f.get("target", "")))
        if not m:
            raise HarnessError(f"{at}.target={f.get('target')!r}: use primary(shard=I), replica(shard=I), "
                               f"shard-I/R, worker-J or etcd")
        shard = m.group(2) or m.group(3)
        if shard is not None and int(shard) >= spec.shards:
            raise HarnessError(f"{at}.target={f['target']!r}: there are {spec.shards} shards (0..{spec.shards - 1})")
        if m.group(4) is not None and int(m.group(4)) >= spec.copies:
            raise HarnessError(f"{at}.target={f['target']!r}: there are {spec.copies} copies a shard")
        if m.group(5) is not None and int(m.group(5)) >= spec.workers:
            raise HarnessError(f"{at}.target={f['target']!r}: there are {spec.workers} workers")
