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

import math
import statistics
import threading
import time
from typing import Any, Callable

import numpy as np

from pschaos.harness.errors import HarnessError

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

__all__ = ["RunCpu", "charged_between", "copies_cpu", "copy_cpu_extras", "copy_idle_extra", "cpu_of", "idle_rates",
           "per_call_workers", "per_op", "per_push_roles", "push_cpu", "replicate_cpu", "server_cpu", "training_window",
           "twin_idle_rates", "worker_windows"]
