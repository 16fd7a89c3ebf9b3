"""The deposed-primary watch's etcd load (review H3): N calls of one PS client wait on a frozen
primary of one shard for HOLD seconds, and this counts the etcd reads the watch makes. Real
threads and clock, PSClient's own `_call_primary`; the stub (futures that never answer) and etcd
(an in-memory fake, 2 ms a read) are fakes, so only the watch's own reads are counted.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/watch_fanout.py [--calls 8] [--hold 5] [--method Push|Pull]

A Pull is a BSP/SSP barrier pull (min_clock >= 0), which the watch looks at less often.
"""
from __future__ import annotations

import argparse
import threading
import time

import grpc

from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.etcd import KV
from pschaos.psnodes.proto import ps_pb2


class Frozen:
    """A call to a frozen primary: no answer, DEADLINE_EXCEEDED at its deadline."""

    def __init__(self, timeout: float) -> None:
        self.end = time.monotonic() + timeout

    def result(self, timeout: float | None = None):
        left = self.end - time.monotonic()
        if timeout is None or timeout >= left:
            time.sleep(max(0.0, left))
            raise grpc.RpcError("deadline exceeded")
        time.sleep(timeout)
        raise grpc.FutureTimeoutError()

    def cancel(self) -> bool:
        return True


class Method:
    def future(self, req, timeout=None, metadata=None) -> Frozen:
        return Frozen(timeout)


class Stub:
    def __init__(self, node: str) -> None:
        self.Push = self.Pull = Method()


class CountingEtcd:
    def __init__(self, kv: dict[str, KV]) -> None:
        self.kv, self.reads = kv, 0

    def get(self, key: str, serializable: bool = False) -> KV | None:
        self.reads += 1
        time.sleep(0.002)
        return self.kv.get(key)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=8)
    ap.add_argument("--hold", type=float, default=5.0)
    ap.add_argument("--method", choices=("Push", "Pull"), default="Push")
    a = ap.parse_args()
    cfg = ClusterConfig(cluster_id="bench", etcd="http://127.0.0.1:9", shards=1)
    rec = ShardRecord(1, "shard-0/0", ["shard-0/0"])
    etcd = CountingEtcd({cfg.shard_key(0): KV(cfg.shard_key(0), rec.to_json().encode(), 2, 0)})
    c = PSClient(cfg, "worker-0", etcd=etcd, stub_factory=Stub)
    req = (ps_pb2.PushRequest(shard=0, epoch=1) if a.method == "Push"
           else ps_pb2.PullRequest(shard=0, epoch=1, min_clock=5))

    def one() -> None:
        try:
            c._call_primary(0, rec, a.method, req, a.hold)
        except grpc.RpcError:
            pass
    threads = [threading.Thread(target=one) for _ in range(a.calls)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.monotonic() - t0
    print(f"{a.calls} {a.method} calls held {a.hold} s: {etcd.reads} etcd reads in {dt:.2f} s "
          f"= {etcd.reads / dt:.1f} reads/s")
    c.close()


if __name__ == "__main__":
    main()
