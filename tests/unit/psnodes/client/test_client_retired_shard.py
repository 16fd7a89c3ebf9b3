"""A worker that missed a scale-in's switch keeps calling the retired shard, whose group is gone:
it answers nothing, never a stale routing epoch. The client re-reads the routing record while a
shard does not answer and re-routes once the record no longer names it (review section 4), instead
of failing the pull with Unavailable after its whole retry budget."""
from __future__ import annotations

import threading

import grpc
import numpy as np

from pschaos.psnodes.elastic import routing
from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.runtime import Runtime
from tests.unit.psnodes.elastic.test_migration_coordinator import LosesAnswers


class Down(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.UNAVAILABLE

    def details(self):
        return "connection refused (the group was stopped)"


class Stub:
    def __init__(self, node: str) -> None:
        self.node = node

    def Pull(self, req, timeout=None, metadata=None):
        if self.node.startswith("shard-1"):
            raise Down()
        return ps_pb2.PullReply(epoch=1, seq=3, node=self.node, dense=[tensor_to_pb("w", np.ones(2))])


class Clock:
    def __init__(self) -> None:
        self.t, self.lock = 0.0, threading.Lock()

    def sleep(self, s: float) -> None:
        with self.lock:
            self.t += s


def test_a_pull_from_a_retired_shard_re_routes_by_the_record_instead_of_failing() -> None:
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=2)
    etcd = LosesAnswers(0)
    for s in (0, 1):
        etcd.cas(cfg.shard_key(s), 0, ShardRecord(1, f"shard-{s}/0", [f"shard-{s}/0"]).to_json())
    clock = Clock()
    c = PSClient(cfg, "worker-0", etcd=etcd, stub_factory=Stub, retry_budget=20.0,
                 runtime=Runtime(monotonic=lambda: clock.t, sleep=clock.sleep, time=lambda: 1.0))
    try:
        routing.swap(etcd, cfg, 0, Routing(1, (0,), None))     # the scale-in 2 -> 1 switched; we missed it
        assert c.routing.shards == (0, 1)
        got = c.pull_dense()
        assert set(got.dense) == {"w"} and c.routing.shards == (0,)
        assert clock.t < 5.0, f"re-routed only after {clock.t:.1f} s of retries"
    finally:
        c.close()
