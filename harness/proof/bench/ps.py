"""`pschaos bench ps`: parameter-server throughput and failover, as ratios measured in one run.

Every figure comes from the same machine in the same run, in interleaved rounds (echo, PS, PS with
a sync replica, torch.distributed.rpc default, torch.distributed.rpc TCP only) so drift on a shared
machine hits all alike. A raw-bytes gRPC echo (no protobuf on either side) is the ceiling for our
wire; a torch.distributed.rpc parameter server written the usual way is the yardstick, on its
default transport and on TCP only. Failed failovers count (as +inf), never dropped. Nothing here
asserts a time; `make bench` prints, people judge.
"""
from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from pschaos.psnodes.wire.channels import dial
from pschaos.psnodes.wire.codec import rows_to_pb, tensor_to_pb
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.server.servicer import SERVICE
from pschaos.psnodes.server.tuning import tune_malloc

from pschaos.harness.backends.process.backend import ProcessBackend
from pschaos.harness.proof.bench.torchrpc import TorchRpcPS
from pschaos.harness.machinery.procs import wait_until
from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.run.metrics import failover_stats

KILL_WAIT_S = 15.0      # a kill with no ack at a higher epoch within this is a failed failover


def _cluster(tmp: Path, copies: int, tables: dict[str, int] | None = None) -> ProcessBackend:
    spec = ClusterSpec(shards=1, copies=copies, workers=0, replication="sync", optimizer="sgd",
                       checkpoint_interval_s=3600)
    be = ProcessBackend(spec, tmp / f"c{copies}-{uuid.uuid4().hex[:4]}", f"bench-{uuid.uuid4().hex[:6]}", 1,
                        tables=tables)
    be.start()
    return be


def _timed(fn, seconds: float) -> tuple[int, float]:
    fn()                                   # warm-up: connections, first allocations
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n, time.perf_counter() - t0


def _prepare(be: ProcessBackend, mb: float) -> None:
    be.client.init_dense({"w": np.zeros(int(mb * (1 << 20) / 4), dtype=np.float32)})


def dense_mb_s(be: ProcessBackend, mb: float, seconds: float) -> float:
    c = be.client
    size = int(mb * (1 << 20) / 4)
    push = ps_pb2.PushRequest(shard=0, update=ps_pb2.Update(
        worker="bench", dense=[tensor_to_pb("w", np.full(size, 1e-3, dtype=np.float32))]))
    rid = iter(range(1, 1 << 40))

    def with_epoch(ep: int) -> ps_pb2.PushRequest:
        push.epoch = ep
        return push

    def once() -> None:
        push.update.req_id = next(rid)
        c.call(0, "Push", with_epoch)
        c.call(0, "Pull", lambda ep: ps_pb2.PullRequest(shard=0, epoch=ep, since_seq=0, min_clock=-1))

    n, dt = _timed(once, seconds)
    return 2 * n * size * 4 / 1e6 / dt


def echo_mb_s(be: ProcessBackend, mb: float, seconds: float) -> float:
    """Raw bytes both ways (identity (de)serializers here and in the servicer): the wire's ceiling."""
    c = be.client
    blob = bytes(int(mb * (1 << 20)))
    ch = dial(c.links[be.routing()[0].primary], c.cfg.max_message_bytes)
    try:
        echo = ch.unary_unary(f"/{SERVICE}/Echo")          # no serializers: bytes in, bytes out
        n, dt = _timed(lambda: echo(blob, timeout=10, metadata=c.md), seconds)
    finally:
        ch.close()
    return 2 * n * len(blob) / 1e6 / dt


def embedding_rows_s(be: ProcessBackend, seconds: float, ids_per_call: int = 4096, dim: int = 64) -> float:
    c = be.client
    rng = np.random.default_rng(0)
    rid = iter(range(1, 1 << 40))

    def once() -> None:
        ids = rng.integers(0, 1_000_000, ids_per_call)
        req_rows = rows_to_pb("emb", ids, None, dim)
        c.call(0, "Pull", lambda ep: ps_pb2.PullRequest(shard=0, epoch=ep, sparse=[req_rows], no_dense=True,
                                                        min_clock=-1))
        upd = ps_pb2.Update(worker="bench", req_id=next(rid),
                            sparse=[rows_to_pb("emb", ids, np.full((ids_per_call, dim), 1e-3), dim)])
        c.call(0, "Push", lambda ep: ps_pb2.PushRequest(shard=0, epoch=ep, update=upd))

    n, dt = _timed(once, seconds)
    return n * ids_per_call / dt


def failover_ms(be: ProcessBackend, kills: int, progress) -> list[float | None]:
    """Kill the primary `kills` times under a steady push load; ms from kill to the first ack at a
    higher epoch, or None when none came within KILL_WAIT_S (a failed failover, kept, not dropped).
    The killed node is restarted and let back into the ISR before the next kill."""
    c = be.client
    c.init_dense({"f": np.zeros(256, dtype=np.float32)})
    acks: list[tuple[float, int]] = []
    stop = threading.Event()

    def load() -> None:
        rid = iter(range(1, 1 << 40))
        upd = ps_pb2.Update(worker="bench-load", dense=[tensor_to_pb("f", np.full(256, 1e-3, dtype=np.float32))])
        while not stop.is_set():
            upd.req_id = next(rid)
            try:
                rep = c.call(0, "Push", lambda ep: ps_pb2.PushRequest(shard=0, epoch=ep, update=upd), timeout=1.0)
                acks.append((time.monotonic(), rep.epoch))
            except Exception:
                time.sleep(0.01)

    th = threading.Thread(target=load, daemon=True)
    th.start()
    out = []
    try:
        for k in range(kills):
            rec = be.routing()[0]
            wait_until(lambda: len(be.routing()[0].isr) == be.spec.copies, 20)
            time.sleep(0.2)
            t_kill = time.monotonic()
            be.kill(rec.primary)
            ok = wait_until(lambda: any(t >= t_kill and ep > rec.epoch for t, ep in acks[-50:]), KILL_WAIT_S, 0.005)
            if ok:
                first = min(t for t, ep in acks if t >= t_kill and ep > rec.epoch)
                out.append((first - t_kill) * 1000)
            else:
                out.append(None)
            be.restart(rec.primary)
            progress(f"failover {k + 1}/{kills}: {out[-1]:.0f} ms" if ok
                     else f"failover {k + 1}/{kills}: FAILED (no new primary within {KILL_WAIT_S:.0f} s)")
    finally:
        stop.set()
        th.join(5)
    return out


def _median_ratio(num: list[float], den: list[float]) -> float:
    """Median of per-round ratios: each ratio pairs figures measured seconds apart."""
    return round(float(np.median([a / b for a, b in zip(num, den)])), 3)


def bench_ps(args) -> int:
    def progress(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    tune_malloc()
    res: dict = {}
    names = {"echo": "grpc_echo_mb_s", "ps": "ps_dense_mb_s", "sync": "ps_dense_sync1_mb_s",
             "torch": "torch_rpc_mb_s", "torch_tcp": "torch_rpc_tcp_mb_s"}
    rounds: dict[str, list[float]] = {k: [] for k in names}
    with tempfile.TemporaryDirectory(prefix="pschaos-bench-") as d:
        tmp = Path(d)
        solo, pair = _cluster(tmp, 1, tables={"emb": 64}), _cluster(tmp, 2)
        yard: list[TorchRpcPS] = []
        try:
            _prepare(solo, args.mb)
            _prepare(pair, args.mb)
            progress("starting torch.distributed.rpc parameter servers (default transport, TCP only)")
            yard.append(TorchRpcPS(args.mb, tcp_only=False))
            yard.append(TorchRpcPS(args.mb, tcp_only=True))
            for r in range(args.rounds):       # interleaved, so drift on a shared machine hits all alike
                progress(f"round {r + 1}/{args.rounds}: raw gRPC echo, PS push+pull without and with a sync "
                         f"replica, torch.distributed.rpc default and TCP only")
                rounds["echo"].append(echo_mb_s(solo, args.mb, args.seconds))
                rounds["ps"].append(dense_mb_s(solo, args.mb, args.seconds))
                rounds["sync"].append(dense_mb_s(pair, args.mb, args.seconds))
                rounds["torch"].append(yard[0].measure(args.seconds))
                rounds["torch_tcp"].append(yard[1].measure(args.seconds))
            progress("embedding rows")
            res["embedding_rows_s"] = round(embedding_rows_s(solo, args.seconds), 0)
        finally:
            for y in yard:
                y.close()
            solo.teardown()
            pair.teardown()
        for k, key in names.items():
            res[key] = round(float(np.median(rounds[k])), 1)
        res["sync_over_norep"] = _median_ratio(rounds["sync"], rounds["ps"])
        res["rounds"] = {key: [round(x, 1) for x in rounds[k]] for k, key in names.items()}
        be = _cluster(tmp, 3)
        try:
            times = failover_ms(be, args.kills, progress)
        finally:
            be.teardown()
    res["failover_ms"] = {**failover_stats(times), "kills": args.kills, "wait_s": KILL_WAIT_S}
    res["failover_failed"] = res["failover_ms"]["failed"]
    res["ratios"] = {"ps_over_echo": _median_ratio(rounds["ps"], rounds["echo"]),
                     "ps_over_torch_rpc": _median_ratio(rounds["ps"], rounds["torch"]),
                     "ps_over_torch_rpc_tcp": _median_ratio(rounds["ps"], rounds["torch_tcp"]),
                     # is the gap our wire (gRPC-Python) or what the PS does on top of it?
                     "echo_over_torch_rpc": _median_ratio(rounds["echo"], rounds["torch"]),
                     "echo_over_torch_rpc_tcp": _median_ratio(rounds["echo"], rounds["torch_tcp"])}
    p99 = res["failover_ms"]["p99"]
    res["targets"] = {"ps_over_echo>=0.8": res["ratios"]["ps_over_echo"] >= 0.8,
                      "ps_over_torch_rpc>=1.5": res["ratios"]["ps_over_torch_rpc"] >= 1.5,
                      "sync_over_norep>=0.6": res["sync_over_norep"] >= 0.6,
                      "failover_p99<=800": isinstance(p99, float) and p99 <= 800,
                      "failover_failed==0": res["failover_failed"] == 0}
    res["mb"] = args.mb
    print(json.dumps(res, indent=None if args.json else 2))
    return 0
