"""The real parts measured one at a time, each with its median over n tries: a gRPC call by payload size, a push's apply, etcd's operations, a node's start, a worker's training step, a checkpoint's write. Calibration turns them into the twin's costs."""
from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable
import numpy as np

from pschaos.harness.proof.twin.calibrate_cpu import cpu_of, per_op


SIZES = (0, 16 << 10, 256 << 10, 1 << 20)


def _median(fn: Callable[[], None], n: int) -> float:
    fn()                                            # warm-up
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def network(be, say: Callable[[str], None], n: int = 40) -> dict:
    from pschaos.psnodes.server.servicer import SERVICE

    node = be.routing()[0].primary
    ch = be.client.stub(node)._channel if hasattr(be.client.stub(node), "_channel") else None
    from pschaos.psnodes.wire.channels import dial

    ch = ch or dial(be.cfg.addresses[node], be.cfg.max_message_bytes)
    echo = ch.unary_unary(f"/{SERVICE}/Echo", request_serializer=None, response_deserializer=None)
    rtts = []
    for size in SIZES:
        blob = bytes(size)
        rtts.append(_median(lambda: echo(blob, timeout=10, metadata=be.client.md), n))
        say(f"  echo {size:>8} B: round trip {rtts[-1] * 1e3:.3f} ms")
    slope = float(np.polyfit(np.array(SIZES, float), np.array(rtts), 1)[0])
    return {"fixed_s": round(rtts[0] / 2, 7), "per_byte_s": max(0.0, slope / 2)}


def apply_cost(be, net: dict, say: Callable[[str], None], n: int = 15) -> float:
    from pschaos.psnodes.wire.codec import tensor_to_pb
    from pschaos.psnodes.proto import ps_pb2

    per_mb = []
    for mb in (1, 4):
        size = mb * (1 << 20) // 4
        be.client.init_dense({f"cal{mb}": np.zeros(size, np.float32)})
        push = ps_pb2.PushRequest(shard=0, update=ps_pb2.Update(
            worker="calibrate", dense=[tensor_to_pb(f"cal{mb}", np.full(size, 1e-3, np.float32))]))
        rid = iter(range(1, 1 << 40))

        def once() -> None:
            push.update.req_id = next(rid)
            be.client.call(0, "Push", lambda ep: (push.__setattr__("epoch", ep), push)[1])
        t = _median(once, n)
        wire = 2 * net["fixed_s"] + mb * (1 << 20) * net["per_byte_s"]
        per_mb.append(max(0.0, t - wire) / mb)
        say(f"  push {mb} MiB: {t * 1e3:.2f} ms, apply {per_mb[-1] * 1e3:.2f} ms/MiB")
    return round(statistics.mean(per_mb), 6)


def etcd_ops(be, net: dict, say: Callable[[str], None], n: int = 40) -> tuple[float, float, float, float, list]:
    """The real etcd's answer time for a read and for a write (a put: through the WAL and its
    fsync), through psnodes' own client, less the modelled wire both ways; and the CPU per
    operation of the etcd server and of this process (the client), over a burst of 4n reads
    and writes alike (the twin charges those on the host's cores, the rest of the answer time
    stays a wait)."""
    import psutil

    from pschaos.psnodes.etcd import Etcd

    etcd = Etcd(be.cfg.etcd, timeout=5.0)
    key = f"/pschaos-calibrate/{uuid.uuid4().hex[:8]}"
    vals = iter(range(1 << 30))
    write = _median(lambda: etcd.put(key, str(next(vals))), n)
    read = _median(lambda: etcd.get(key), n)

    def burst() -> None:
        for _ in range(2 * n):
            etcd.put(key, str(next(vals)))
            etcd.get(key)
    per = per_op({"server": cpu_of(psutil.Process(be.pids()["etcd"])), "client": cpu_of(psutil.Process())},
                  burst, 4 * n)
    wake = etcd_wake(etcd, key, n)
    etcd.delete(key)
    wire = 2 * net["fixed_s"]
    say(f"  etcd read {read * 1e3:.2f} ms, write {write * 1e3:.2f} ms (round trips, wire included); CPU an "
        f"operation: server {per['server'] * 1e3:.3f} ms, client {per['client'] * 1e3:.3f} ms")
    say("  etcd read after an idle pause: " + ", ".join(f"{g * 1e3:g} ms -> +{e * 1e3:.2f} ms" for g, e in wake))
    return (round(max(0.0, read - wire), 6), round(max(0.0, write - wire), 6), round(per["server"], 7),
            round(per["client"], 7), wake)


WAKE_GAPS_S = (0.001, 0.005, 0.025, 0.1)


def etcd_wake(etcd, key: str, n: int) -> list[list[float]]:
    """How much later a read answers after etcd sat idle: per pause in WAKE_GAPS_S, the median read
    after it less the median read back to back (`etcd_wake_s`), never falling as the pause grows.
    A tight loop keeps etcd's threads and the host's cores awake; a failover's reads come after
    pauses (on this 2-core VM, 2026-12-07: +0.05 ms after 1 ms, +2.1 ms after 25 ms)."""
    def reads(gap: float) -> float:
        out = []
        for _ in range(n):
            if gap:
                time.sleep(gap)
            t0 = time.perf_counter()
            etcd.get(key)
            out.append(time.perf_counter() - t0)
        return statistics.median(out)

    base, points, top = reads(0.0), [], 0.0
    for gap in WAKE_GAPS_S:
        top = max(top, reads(gap) - base)
        points.append([gap, round(top, 6)])
    return points


def node_start(be, say: Callable[[str], None], n: int = 7) -> tuple[float, float, float, list[float], list[float]]:
    """A copy's start: from the backend's restart (a fork from the zygote) until its gRPC server
    answers a Status, the median of `n` kill-and-restart trials of the cluster's one copy; the
    median of the started process's own CPU seconds by then (`node_start_cpu_s`: the twin charges
    that much of the start on the host's shared cores, where a loaded host stretches it, as a real
    restart under training took 144-175 ms against 116 measured here on an idle host); the
    median of how long after each kill its connections closed (`kill_teardown_s`); each kill's
    probe time (`_dead_copy`); and each kill's teardown (`kill_teardown_samples`: the twin draws
    one per kill, so a failover's clients start their retries as spread out as real ones do)."""
    node = be.nodes()[0]
    out, kills, probes, cpus = [], [], [], []
    for _ in range(n):
        k, p = _dead_copy(be, node)
        kills.append(k)
        probes.append(p)
        be.kill(node)                                # reaps it (already dead)
        t0 = time.perf_counter()
        be.restart(node)
        while be.status(node, timeout=0.2) is None and time.perf_counter() - t0 < 30:
            time.sleep(0.002)
        out.append(time.perf_counter() - t0)
        cpus.append(_process_cpu(be.pids()[node]))
    s, k, c = statistics.median(out), statistics.median(kills), statistics.median(cpus)
    say(f"  node start: {s * 1e3:.0f} ms (median of {n}: {', '.join(f'{x * 1e3:.0f}' for x in out)}), of it its own "
        f"CPU {c * 1e3:.0f} ms ({', '.join(f'{x * 1e3:.0f}' for x in cpus)}); a SIGKILL until "
        f"its connections close: {k * 1e3:.1f} ms ({', '.join(f'{x * 1e3:.1f}' for x in kills)}); then a probe "
        f"of it fails in {statistics.median(probes) * 1e3:.2f} ms ({', '.join(f'{x * 1e3:.2f}' for x in probes)})")
    return round(s, 4), round(min(c, s), 4), round(k, 4), probes, [round(x, 6) for x in kills]


def _process_cpu(pid: int) -> float:
    """A process's CPU seconds so far: the run time of each of its live threads in nanoseconds
    (/proc/PID/task/*/schedstat; psutil's cpu_times counts 10 ms clock ticks, and a start's 20-30
    ms read as 20 or 30), or psutil's total where that is larger (it keeps the CPU of threads
    that already exited)."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    ticks = t.user + t.system
    total, found = 0, False
    for f in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(f.read_text().split()[0])
            found = True
        except (OSError, ValueError, IndexError):
            continue
    return max(total / 1e9, ticks) if found else ticks


PROBE_AFTER_S = 0.12      # a replica probes ~150 ms after the kill: its detector's floor
PROBE_WAIT_S = 0.5        # the probe's deadline: a refusal ends it in milliseconds


def _dead_copy(be, node: str) -> tuple[float, float]:
    """SIGKILL the copy with a replica's probe (psnodes' PrimaryProbe, over `probe_paths`
    channels) connected to it: the time until its connections close (`_socket_close`), and how
    long the probe then takes to fail. That is gRPC's failure path on a closed connection (the
    subchannels' state, the futures and their callback threads), not the wire: traced real
    failovers (2026-12-07) saw probes fail in 2.4-7.9 ms where the twin's wire said 0.3."""
    from types import SimpleNamespace

    from pschaos.psnodes.replication.probe import PrimaryProbe

    addr = be.cfg.addresses[node]
    probe = PrimaryProbe(SimpleNamespace(cfg=be.cfg, links={node: addr}))
    try:
        probe.warm(node)
        for ready in probe.connecting:
            ready.result(timeout=5)                  # connected, as a following replica's are
        teardown = _socket_close(be, node)
        time.sleep(PROBE_AFTER_S)
        t0 = time.perf_counter()
        answered = probe.clears(node, 1 << 30, PROBE_WAIT_S)
        took = time.perf_counter() - t0
        if answered or took > PROBE_WAIT_S / 2:     # not the failure path: never a sample
            raise RuntimeError(f"calibrate: the probe of killed {node} {'was answered' if answered else 'waited'} "
                               f"({took * 1e3:.0f} ms): its connections did not close; is another process on "
                               f"{addr}?")
        return teardown, took
    finally:
        probe.close()


def _socket_close(be, node: str) -> float:
    """SIGKILL the copy and time until a connection to its gRPC port closes (the kernel tears the
    process's memory down before it closes its files): how long a call in flight to a killed
    copy hangs. A raw TCP connection, so no gRPC reconnect logic sits in between."""
    import os
    import signal
    import socket

    host, port = be.cfg.addresses[node].rsplit(":", 1)
    conn = socket.create_connection((host, int(port)), timeout=5)
    try:
        time.sleep(0.05)                             # the server accepted it and sent its HTTP/2 settings
        conn.setblocking(False)
        try:
            while conn.recv(65536):
                pass
        except BlockingIOError:
            pass
        conn.settimeout(5)
        t0 = time.perf_counter()
        os.kill(be.pids()[node], signal.SIGKILL)
        try:
            while conn.recv(65536):                  # until b"" (closed) or a reset
                pass
        except OSError:
            pass
        return time.perf_counter() - t0
    finally:
        conn.close()


def worker_steps(say: Callable[[str], None], n: int = 30) -> dict[str, float]:
    import torch

    from pschaos.psnodes.models import make_task

    torch.set_num_threads(1)
    out = {}
    for model in ("mlp", "widedeep"):
        task = make_task(model, 1, torch.device("cpu"))
        rng = np.random.default_rng(1)

        def step() -> None:
            b = task.batch(rng)
            rows = {}
            if task.tables:
                uniq, inv = np.unique(b.ids, return_inverse=True)
                for t, dim in task.tables.items():
                    r = torch.zeros((uniq.size, dim), requires_grad=True)
                    rows[t] = r[torch.from_numpy(inv.reshape(b.ids.shape))]
            task.model.zero_grad(set_to_none=True)
            task.loss(b, rows).backward()
        out[model] = round(_median(step, n), 6)
        say(f"  worker step {model}: {out[model] * 1e3:.2f} ms")
    return out


def checkpoint_rate(say: Callable[[str], None], n: int = 5) -> float:
    from pschaos.psnodes.store.checkpoint import write_checkpoint

    blob = bytes(4 << 20)
    with tempfile.TemporaryDirectory() as d:
        seq = iter(range(1, 1 << 30))
        t = _median(lambda: write_checkpoint(Path(d), blob, next(seq), 1, "calibrate", term=1), n)
    rate = round(4 * 1.048576 / t, 1)
    say(f"  checkpoint 4 MiB: {t * 1e3:.1f} ms ({rate} MB/s)")
    return rate

