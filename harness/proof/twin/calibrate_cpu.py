"""`pschaos sim calibrate`'s CPU measurements: what a call costs the processes that make and serve it.

Why a module of its own: the twin charges these on the host's shared cores (harness/backends/sim/cpu.py),
and each is measured the same way - a real process's CPU seconds (psutil: user + system, every
thread) over a burst of calls, less what the process spends without them for as long, divided by
the calls. The burst runs one call at a time, so no call waits on another's CPU.

Measured here:
- a primary's CPU per small request (pushes and pulls alike) and its caller's (`server_cpu`);
- replication (`replicate_cpu`), on a 1-shard x 3-copy sync cluster: a replica's CPU per
  Replicate it serves (a small one) and per MB the request carries, and the primary's CPU per
  Replicate it sends (the sender thread's encoding, gRPC and reply, beyond what a lone primary
  spends on the same push). A Replicate is not a push: its request is raw bytes the primary
  encodes by hand (psnodes/wire/wire.py) and the replica applies entries without the PS client's
  protobuf or the push's dedup and ack wait, so charging it a push's server CPU (0.85 ms) and
  a caller's CPU (0.78 ms) on top made the twin's replicas trail their primary far longer than
  real ones (kill-primary's catch-up bytes were 61% over the real runs').
- what a copy spends in a training run beyond those (`RunCpu`, `copy_cpu_extras`): each real
  process's CPU seconds, polled, against its twin's CPU charges per owner (SimCPU.log); per
  push, a primary's and a replica's difference. A burst on an idle
  cluster is the floor; on a busy host, with workers and six copies on two cores, a real copy
  spent 2-4x as much per push. Both are read over the run's training window (first step to
  0.5 s before the last: a copy's start and teardown left out), per push its shard's primary
  applied.
- what a worker spends per call beyond the burst's caller figure (`per_call_workers`), from the
  same runs: its process's CPU per Push or Pull it made.
- what a copy spends a second while idle beyond the twin's idle charges (`idle_rates` against
  `twin_idle_rates`): gRPC's and serve.py's threads cost a real copy 25-45 ms a second with no
  call asked of it, the twin's heartbeats and keepalives 10-20; a cluster of twelve copies after
  a scale-out left its workers that much less of the host.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import numpy as np

from pschaos.harness.errors import HarnessError
from pschaos.harness.proof.twin.run_cpu import charged_between

SMALL_FLOATS = 2656          # the mlp's share of dense floats on 2 shards: a scenario's push
BIG_FLOATS = 1 << 18         # 1 MiB of float32: the per-MB cost


def cpu_of(proc) -> Callable[[], float]:
    """A psutil.Process's CPU seconds (user + system, every thread) as a function."""
    def cpu() -> float:
        t = proc.cpu_times()
        return t.user + t.system
    return cpu


def measure(cpus: dict[str, Callable[[], float]], burst: Callable[[], None]
            ) -> tuple[dict[str, float], dict[str, float], float]:
    """Run `burst`: each process's CPU seconds over it, each one's CPU seconds a second while idle
    for as long afterwards (at most 5 s), and the burst's wall time."""
    c0, w0 = {k: f() for k, f in cpus.items()}, time.perf_counter()
    burst()
    took = time.perf_counter() - w0
    busy = {k: f() - c0[k] for k, f in cpus.items()}
    c1 = {k: f() for k, f in cpus.items()}
    quiet = min(took, 5.0)
    time.sleep(quiet)
    return busy, {k: (f() - c1[k]) / quiet for k, f in cpus.items()}, took


def per_op(cpus: dict[str, Callable[[], float]], burst: Callable[[], None], ops: int,
           idle_ops_per_s: dict[str, float] | None = None) -> dict[str, float]:
    """Each process's CPU seconds per operation over `burst` (`ops` operations), less what it spends
    idle for as long (heartbeats, lease keepalives, the harness's threads). A process that also
    does the measured operation while idle (`idle_ops_per_s`: a replica serves a heartbeat
    Replicate every heartbeat_s) has those taken out of the idle share and counted as operations:
    per op = (busy - idle rate x took) / (ops - idle ops a second x took)."""
    idle_ops_per_s = idle_ops_per_s or {}
    busy, idle_rate, took = measure(cpus, burst)
    return {k: max(0.0, busy[k] - idle_rate[k] * took) / max(1.0, ops - idle_ops_per_s.get(k, 0.0) * took)
            for k in cpus}


def _pusher(be, name: str, floats: int) -> Callable[[int], None]:
    """`push(n)`: n sync pushes of `floats` float32s to shard 0, one at a time, through psnodes'
    own client (the key made first)."""
    from pschaos.psnodes.wire.codec import tensor_to_pb
    from pschaos.psnodes.proto import ps_pb2

    be.client.init_dense({name: np.zeros(floats, np.float32)})
    req = ps_pb2.PushRequest(shard=0, update=ps_pb2.Update(
        worker=f"calibrate-{name}", dense=[tensor_to_pb(name, np.full(floats, 1e-3, np.float32))]))
    rid = iter(range(1, 1 << 40))

    def push(n: int) -> None:
        for _ in range(n):
            req.update.req_id = next(rid)
            be.client.call(0, "Push", lambda ep: (req.__setattr__("epoch", ep), req)[1])
    return push


def copies_cpu(be) -> dict[str, Callable[[], float]]:
    """Every shard copy's CPU clock (etcd left out)."""
    import psutil

    pids = be.pids()
    return {n: cpu_of(psutil.Process(pids[n])) for n in be.nodes()}


def server_cpu(be, say: Callable[[str], None], n: int = 400) -> tuple[float, float]:
    """A primary's own CPU per small request, and its caller's: the CPU seconds the node's process
    and this one (the PS client, its gRPC threads) spend on `n` pushes and `n` pulls of a
    2,656-float tensor (the mlp's share on 2 shards), over 2n, less what each spends idle for as
    long. The shard must hold about a scenario's state (run it first): a delta pull digests the
    shard's whole dense state on the server and the client's copy on the caller (psnodes/store/digest.py). The twin charges the first on every Push, Pull and Migrate a copy serves and the second
    on every call a worker or the coordinator makes (harness/backends/sim/cpu.py); the scale level's
    server capacity comes from the first."""
    import psutil

    node = be.nodes()[0]
    push = _pusher(be, "calcpu", SMALL_FLOATS)

    def burst() -> None:
        for _ in range(n):
            push(1)
            be.client.pull_dense()
    burst()                                          # warm-up: the first burst pays for caches and JITs
    per = per_op({"server": copies_cpu(be)[node], "client": cpu_of(psutil.Process())}, burst, 2 * n)
    say(f"  CPU a request ({2 * n} pushes and pulls): primary {per['server'] * 1e3:.3f} ms, "
        f"caller {per['client'] * 1e3:.3f} ms")
    return round(per["server"], 7), round(per["client"], 7)


def push_cpu(be, n: int = 400) -> float:
    """A lone primary's (a 1-copy shard's) CPU per small sync push: what `replicate_cpu` takes off
    a replicating primary's to leave its senders' share."""
    node = be.nodes()[0]
    push = _pusher(be, "calpush", SMALL_FLOATS)
    push(n // 4)                                     # warm-up
    return per_op({node: copies_cpu(be)[node]}, lambda: push(n), n)[node]


def _payload_mb(floats: int) -> float:
    """The MB a Replicate of one push of `floats` float32s carries (its entry's encoded update)."""
    from pschaos.psnodes.wire.codec import tensor_to_pb
    from pschaos.psnodes.proto import ps_pb2

    upd = ps_pb2.Update(worker="calibrate-x", req_id=1, dense=[tensor_to_pb("x", np.zeros(floats, np.float32))])
    return (64 + 16 + upd.ByteSize()) / 1e6


def replicate_cpu(be, solo_push_s: float, say: Callable[[str], None], n: int = 400,
                  n_big: int = 40) -> tuple[float, float, float]:
    """On `be`, a 1-shard cluster of 3 sync copies: (a replica's CPU per Replicate request, its CPU
    per MB the request carries, the primary's CPU per Replicate it sends).

    Small pushes one at a time (each is one Replicate to each replica: a sync primary acks after
    both applied, so the next push finds its senders idle), then 1 MiB pushes; a replica's CPU per
    push at the two sizes gives the per-request and per-MB figures (the mean of both replicas).
    The primary's CPU per small push less a lone primary's (`solo_push_s`, `push_cpu`), over its
    two sends, is its CPU per Replicate sent. Heartbeats (one a heartbeat_s per replica while
    idle) are counted as Replicates in the idle share (`per_op`)."""
    primary = be.routing()[0].primary
    replicas = [c for c in be.nodes() if c != primary]
    hb = 1.0 / be.cfg.heartbeat_s
    cpus = copies_cpu(be)
    small, big = _pusher(be, "calrep", SMALL_FLOATS), _pusher(be, "calrepbig", BIG_FLOATS)
    small(n // 4)
    big(max(2, n_big // 4))                          # warm-up
    busy, idle, took = measure(cpus, lambda: small(n))
    per_big = per_op(cpus, lambda: big(n_big), n_big, {r: hb for r in replicas})
    mb_small, mb_big = _payload_mb(SMALL_FLOATS), _payload_mb(BIG_FLOATS)
    rep_small = statistics.mean(max(0.0, busy[r] - idle[r] * took) / (n - hb * took) for r in replicas)
    rep_big = statistics.mean(per_big[r] for r in replicas)
    per_mb = max(0.0, (rep_big - rep_small) / (mb_big - mb_small))
    request = max(0.0, rep_small - per_mb * mb_small)
    # the primary: busy = background + n pushes + k n sends; idle = background + k hb sends a second
    k = len(replicas)
    send = max(0.0, (busy[primary] - idle[primary] * took - n * solo_push_s) / (k * n - k * hb * took))
    sends = (busy[primary] - idle[primary] * took) / n
    say(f"  Replicate CPU ({n} pushes of {mb_small * 1e3:.1f} kB and {n_big} of {mb_big:.2f} MB, "
        f"2 replicas): replica {request * 1e3:.3f} ms a request + {per_mb * 1e3:.2f} ms a MB "
        f"(per push: {rep_small * 1e3:.3f} ms small, {rep_big * 1e3:.2f} ms big); primary "
        f"{sends * 1e3:.3f} ms a push vs {solo_push_s * 1e3:.3f} ms alone -> {send * 1e3:.3f} ms a send")
    return round(request, 7), round(per_mb, 6), round(send, 7)


def idle_rates(cpus: dict[str, Callable[[], float]], seconds: float = 4.0) -> dict[str, float]:
    """Each process's CPU seconds a second over `seconds` of doing nothing asked of it."""
    c0, w0 = {k: f() for k, f in cpus.items()}, time.perf_counter()
    time.sleep(seconds)
    took = time.perf_counter() - w0
    return {k: (f() - c0[k]) / took for k, f in cpus.items()}


IDLE_SETTLE_S = 2.0     # how long after a cluster's start its idle CPU is read from: past registration


def twin_idle_rates(cal: Any, spec: Any, run_dir: Any, seconds: float = 4.0) -> dict[str, float]:
    """As `idle_rates`, for the twin of the same idle cluster under `cal`: each copy's CPU charged
    a virtual second (its heartbeats, keepalives and whatever else the model charges idle)."""
    from pschaos.harness.backends.sim.backend import SimBackend

    be = SimBackend(spec, run_dir, "calibrate-idle", 1, calibration=cal)
    be.charge_log = []
    try:
        be.start(timeout=10)
        be.clock.sleep(IDLE_SETTLE_S)
        a = be.env.now
        be.clock.sleep(seconds)
        b = be.env.now
        charged = charged_between(be.cpu.log, a, b)
        missing = [n for n in be.nodes() if n not in charged]
        if missing and cal.cpu_model:
            raise HarnessError(f"calibrate: the twin charged {', '.join(missing)} no CPU over {seconds} idle "
                               "seconds; its heartbeats alone cost some: the CPU model is off")
        return {n: charged.get(n, 0.0) / (b - a) for n in be.nodes()}
    finally:
        be.teardown()


def copy_idle_extra(real: dict[str, float], twin: dict[str, float]) -> float:
    """A copy's CPU a second beyond the twin's idle charges: the mean over copies, at least 0."""
    if not real or not twin:
        raise HarnessError("calibrate: no idle CPU reading of the copies")
    return round(max(0.0, statistics.fmean(real.values()) - statistics.fmean(twin.values())), 6)


__all__ = ["copies_cpu", "copy_idle_extra", "cpu_of", "idle_rates", "per_op", "push_cpu", "replicate_cpu", "server_cpu",
           "twin_idle_rates"]
