"""A worker's call to a frozen primary (SIGSTOP: its TCP connection stays up, it never answers)
is given up as soon as the shard record names the successor, not at the call's 2 s deadline; a
call to a slow but alive primary (a large push under a bandwidth cap) whose record does not move
is never cut. The old design, a 250 ms HTTP/2 ping timeout on every client channel, killed the
slow call too (tests/integration/test_faults.py::test_bandwidth_caps_throughput); these pin the
replacement, psnodes.client.PSClient._call_primary, with a fake stub and etcd."""
from __future__ import annotations

import threading

import grpc

from psnodes.client import PSClient
from psnodes.config import ClusterConfig, ShardRecord
from psnodes.proto import ps_pb2
from tests.unit.test_migration_coordinator import LosesAnswers


class Call:
    """A call in flight: answered after `answer_after` waits of the caller (None: never)."""

    def __init__(self, node: str, epoch: int, answer_after: int | None, on_wait) -> None:
        self.node, self.epoch, self.answer_after, self.on_wait = node, epoch, answer_after, on_wait
        self.waits, self.cancelled = 0, False

    def result(self, timeout=None):
        if self.answer_after is not None and self.waits >= self.answer_after:
            return ps_pb2.PushReply(epoch=self.epoch, seq=1, node=self.node)
        assert timeout is not None, "a call to a frozen primary waited without a bound"
        self.waits += 1
        self.on_wait(self)
        raise grpc.FutureTimeoutError()

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class Method:
    def __init__(self, node: str, calls: list, answer_after, on_wait) -> None:
        self.node, self.calls, self.answer_after, self.on_wait = node, calls, answer_after, on_wait

    def future(self, req, timeout=None, metadata=None) -> Call:
        call = Call(self.node, req.epoch, self.answer_after.get(self.node, 0), self.on_wait)
        self.calls.append(call)
        return call


def cluster(answer_after: dict, on_wait=lambda call: None):
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1)
    etcd = LosesAnswers(0)
    etcd.cas(cfg.shard_key(0), 0, ShardRecord(1, "shard-0/0", ["shard-0/0", "shard-0/1"]).to_json())
    calls: list[Call] = []

    class Stub:
        def __init__(self, node: str) -> None:
            self.Push = Method(node, calls, answer_after, on_wait)
    return cfg, etcd, calls, PSClient(cfg, "worker-0", etcd=etcd, stub_factory=Stub, retry_budget=5.0)


def test_a_call_to_a_deposed_frozen_primary_is_given_up_and_retried_at_its_successor() -> None:
    def elect(call: Call) -> None:        # the replicas elect shard-0/1 while the call waits
        if call.waits == 3:
            kv = etcd.get(cfg.shard_key(0))
            etcd.cas(cfg.shard_key(0), kv.mod_revision, ShardRecord(2, "shard-0/1", ["shard-0/1"]).to_json())
    cfg, etcd, calls, c = cluster({"shard-0/0": None}, elect)
    try:
        rep = c.call(0, "Push", lambda ep: ps_pb2.PushRequest(shard=0, epoch=ep))
        assert (rep.node, rep.epoch) == ("shard-0/1", 2)
        assert calls[0].cancelled and calls[0].waits == 3, "the deposed primary's call was not given up at once"
        assert c.routes[0].primary == "shard-0/1"
    finally:
        c.close()


def test_a_slow_call_to_a_primary_still_in_its_record_is_never_cut() -> None:
    cfg, etcd, calls, c = cluster({"shard-0/0": 200})       # 200 looks at the record, ~10 s
    try:
        rep = c.call(0, "Push", lambda ep: ps_pb2.PushRequest(shard=0, epoch=ep))
        assert rep.node == "shard-0/0" and len(calls) == 1 and not calls[0].cancelled
    finally:
        c.close()
