"""`pschaos bench ps`: parameter-server throughput and failover, as ratios measured in one run.

Every figure comes from the same machine in the same run: a raw gRPC bytes echo is the ceiling
for our wire, and a torch.distributed.rpc parameter server written the usual way is the
yardstick. Nothing here asserts a time; `make bench` prints, people judge.
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

from psnodes.codec import rows_to_pb, tensor_to_pb
from psnodes.proto import ps_pb2
from psnodes.tuning import tune_malloc

from .backend_process import ProcessBackend
from .bench_torchrpc import torch_rpc_mb_s
from .procs import wait_until
from .scenario import ClusterSpec


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
    c = be.client
    blob = ps_pb2.Blob(data=bytes(int(mb * (1 << 20))))
    stub = c.stub(be.routing()[0].primary)
    n, dt = _timed(lambda: stub.Echo(blob, timeout=10, metadata=c.md), seconds)
    return 2 * n * len(blob.data) / 1e6 / dt


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


def failover_ms(be: ProcessBackend, kills: int, progress) -> list[float]:
    """Kill the primary `kills` times under a steady push load; ms from kill to the first ack at a
    higher epoch. The killed node is restarted and let back into the ISR before the next kill."""
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
            ok = wait_until(lambda: any(t >= t_kill and ep > rec.epoch for t, ep in acks[-50:]), 15, 0.005)
            if ok:
                first = min(t for t, ep in acks if t >= t_kill and ep > rec.epoch)
                out.append((first - t_kill) * 1000)
            be.restart(rec.primary)
            progress(f"failover {k + 1}/{kills}: {out[-1]:.0f} ms" if ok else f"failover {k + 1}/{kills}: none")
    finally:
        stop.set()
        th.join(5)
    return out


def bench_ps(args) -> int:
    def progress(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    tune_malloc()
    res: dict = {}
    with tempfile.TemporaryDirectory(prefix="pschaos-bench-") as d:
        tmp = Path(d)
        solo, pair = _cluster(tmp, 1, tables={"emb": 64}), _cluster(tmp, 2)
        try:
            _prepare(solo, args.mb)
            _prepare(pair, args.mb)
            rounds: dict[str, list[float]] = {"echo": [], "ps": [], "sync": []}
            for r in range(args.rounds):       # interleaved, so drift on a shared machine hits all alike
                progress(f"round {r + 1}/{args.rounds}: grpc echo, dense push+pull without and with a sync replica")
                rounds["echo"].append(echo_mb_s(solo, args.mb, args.seconds))
                rounds["ps"].append(dense_mb_s(solo, args.mb, args.seconds))
                rounds["sync"].append(dense_mb_s(pair, args.mb, args.seconds))
            progress("embedding rows")
            res["embedding_rows_s"] = round(embedding_rows_s(solo, args.seconds), 0)
        finally:
            solo.teardown()
            pair.teardown()
        med = {k: float(np.median(v)) for k, v in rounds.items()}
        res["grpc_echo_mb_s"] = round(med["echo"], 1)
        res["ps_dense_mb_s"] = round(med["ps"], 1)
        res["ps_dense_sync1_mb_s"] = round(med["sync"], 1)
        res["sync_over_norep"] = round(float(np.median([s / p for s, p in zip(rounds["sync"], rounds["ps"])])), 3)
        res["rounds"] = {k: [round(x, 1) for x in v] for k, v in rounds.items()}
        progress("torch.distributed.rpc parameter server")
        res["torch_rpc_mb_s"] = round(torch_rpc_mb_s(args.mb, args.seconds * args.rounds), 1)
        be = _cluster(tmp, 3)
        try:
            times = failover_ms(be, args.kills, progress)
        finally:
            be.teardown()
    a = np.asarray(times) if times else np.asarray([np.nan])
    res["failover_ms"] = {"p50": round(float(np.percentile(a, 50)), 1), "p99": round(float(np.percentile(a, 99)), 1),
                          "max": round(float(a.max()), 1), "n": len(times), "kills": args.kills}
    res["ratios"] = {"ps_over_echo": round(float(np.median([p / e for p, e in zip(rounds["ps"], rounds["echo"])])), 3),
                     "ps_over_torch_rpc": round(res["ps_dense_mb_s"] / res["torch_rpc_mb_s"], 3)}
    res["targets"] = {"ps_over_echo>=0.8": res["ratios"]["ps_over_echo"] >= 0.8,
                      "ps_over_torch_rpc>=1.5": res["ratios"]["ps_over_torch_rpc"] >= 1.5,
                      "sync_over_norep>=0.6": res["sync_over_norep"] >= 0.6,
                      "failover_p99<=800": res["failover_ms"]["p99"] <= 800}
    res["mb"] = args.mb
    print(json.dumps(res, indent=None if args.json else 2))
    return 0
