"""A worker's call to a frozen primary (SIGSTOP: its TCP connection stays up, it never answers)
is given up as soon as the shard record names the successor, not at the call's 2 s deadline; a
call to a slow but alive primary (a large push under a bandwidth cap) whose record does not move
is never cut. The old design, a 250 ms HTTP/2 ping timeout on every client channel, killed the
slow call too (tests/integration/test_faults.py::test_bandwidth_caps_throughput); these pin the
replacement, pschaos.psnodes.client.shard_calls.ShardCalls._call_primary, with a fake stub, etcd and clock (a wait on a
call moves the clock by its timeout, so every figure here is exact).

Also pinned (each failed on the code before): a reply that arrived while the record was read is
returned, not thrown away; one failed read of etcd does not end the watch; a record that is gone
(a scale-in retired the shard) re-routes at once instead of waiting out the deadline."""
from __future__ import annotations

import time

import grpc
import pytest

from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.client.shard_calls import BARRIER_CHECK_S
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.errors import StaleRouting
from pschaos.psnodes.etcd import EtcdError
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.elastic.routing import key as routing_key, to_json
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.runtime import Runtime
from tests.unit.psnodes.elastic.test_migration_coordinator import LosesAnswers


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class Expired(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self) -> str:
        return "Deadline Exceeded"


class Call:
    """A call in flight: answered after `answer_after` waits of the caller (None: never), or once
    `answered` is set (a reply that came in); DEADLINE_EXCEEDED at its deadline."""

    def __init__(self, node: str, epoch: int, answer_after: int | None, on_wait, clock: Clock,
                 timeout: float) -> None:
        self.node, self.epoch, self.answer_after, self.on_wait = node, epoch, answer_after, on_wait
        self.clock, self.deadline = clock, clock.t + timeout
        self.waits, self.cancelled, self.answered = 0, False, False

    def result(self, timeout=None):
        if self.answered or (self.answer_after is not None and self.waits >= self.answer_after):
            return ps_pb2.PushReply(epoch=self.epoch, seq=1, node=self.node)
        assert timeout is not None, "a call to a frozen primary waited without a bound"
        if self.clock.t + timeout >= self.deadline:
            self.clock.t = self.deadline
            raise Expired()
        self.waits += 1
        self.clock.t += timeout
        self.on_wait(self)
        raise grpc.FutureTimeoutError()

    def cancel(self) -> bool:
        if self.answered:
            return False                  # grpc: a call that completed cannot be cancelled
        self.cancelled = True
        return True


class Method:
    def __init__(self, node: str, calls: list, answer_after, on_wait, clock: Clock) -> None:
        self.node, self.calls, self.answer_after, self.on_wait, self.clock = node, calls, answer_after, on_wait, clock

    def future(self, req, timeout=None, metadata=None) -> Call:
        call = Call(self.node, req.epoch, self.answer_after.get(self.node, 0), self.on_wait, self.clock, timeout)
        self.calls.append(call)
        return call


class Etcd(LosesAnswers):
    """The fake etcd, with reads that fail while `down` (or for the next `fail_reads`) and delete."""

    def __init__(self) -> None:
        super().__init__(0)
        self.down, self.fail_reads, self.reads = False, 0, 0

    def get(self, key: str, serializable: bool = False):
        self.reads += 1
        if self.down or self.fail_reads:
            self.fail_reads = max(0, self.fail_reads - 1)
            raise EtcdError("etcd unreachable: ReadTimeout")
        return super().get(key)

    def delete(self, key: str) -> None:
        self.kv.pop(key, None)


def cluster(answer_after: dict, on_wait=lambda call: None, shards: int = 1, shard: int = 0):
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=shards)
    etcd = Etcd()
    for s in range(shards):
        etcd.cas(cfg.shard_key(s), 0, ShardRecord(1, f"shard-{s}/0", [f"shard-{s}/0", f"shard-{s}/1"]).to_json())
    calls: list[Call] = []
    clock = Clock()

    class Stub:
        def __init__(self, node: str) -> None:
            self.Push = Method(node, calls, answer_after, on_wait, clock)
            self.Pull = Method(node, calls, answer_after, on_wait, clock)
    rt = Runtime(monotonic=clock.now, sleep=clock.sleep, time=time.time)
    return cfg, etcd, calls, clock, PSClient(cfg, "worker-0", etcd=etcd, stub_factory=Stub, retry_budget=5.0,
                                             runtime=rt)


def elect_at(waits: int, cfg_etcd: list, shard: int = 0):
    def elect(call: Call) -> None:        # the replicas elect shard-0/1 while the call waits
        cfg, etcd = cfg_etcd
        if call.waits == waits and call.node == f"shard-{shard}/0":
            kv = etcd.get(cfg.shard_key(shard))
            etcd.cas(cfg.shard_key(shard), kv.mod_revision, ShardRecord(2, f"shard-{shard}/1", [f"shard-{shard}/1"]).to_json())
    return elect


def push(c: PSClient, shard: int = 0):
    return c.call(shard, "Push", lambda ep: ps_pb2.PushRequest(shard=shard, epoch=ep))


def test_a_call_to_a_deposed_frozen_primary_is_given_up_and_retried_at_its_successor() -> None:
    box: list = []
    cfg, etcd, calls, clock, c = cluster({"shard-0/0": None}, elect_at(3, box))
    box += [cfg, etcd]
    try:
        rep = push(c)
        assert (rep.node, rep.epoch) == ("shard-0/1", 2)
        assert calls[0].cancelled and calls[0].waits == 3, "the deposed primary's call was not given up at once"
        assert c.routes[0].primary == "shard-0/1"
    finally:
        c.close()


def test_a_slow_call_to_a_primary_still_in_its_record_is_never_cut() -> None:
    cfg, etcd, calls, clock, c = cluster({"shard-0/0": 30})       # 30 looks at the record, ~1.6 s
    try:
        rep = push(c)
        assert rep.node == "shard-0/0" and len(calls) == 1 and not calls[0].cancelled
    finally:
        c.close()


def test_a_reply_that_came_while_the_record_was_read_is_returned_not_thrown_away() -> None:
    """The old primary acked just before its successor was elected: the reply is in when the
    client reads the record that names the successor, so cancel() fails. The ack stands (the old
    code raised Deposed and sent the push again, hiding the old primary's ack from the history)."""
    box: list = []
    elect = elect_at(3, box)

    def acked_then_elected(call: Call) -> None:
        elect(call)
        if call.waits == 3:
            call.answered = True
    cfg, etcd, calls, clock, c = cluster({"shard-0/0": None}, acked_then_elected)
    box += [cfg, etcd]
    try:
        rep = push(c)
        assert (rep.node, rep.epoch) == ("shard-0/0", 1), "a reply that had arrived was thrown away"
        assert len(calls) == 1 and not calls[0].cancelled
    finally:
        c.close()


def test_one_failed_read_of_etcd_does_not_end_the_watch() -> None:
    """The first look at the record fails (etcd slow under the election's load); the successor is
    elected later and the call is still given up, long before its 2 s deadline."""
    box: list = []
    cfg, etcd, calls, clock, c = cluster({"shard-0/0": None}, elect_at(3, box))
    box += [cfg, etcd]
    c.refresh(0)                          # the route is known: the failed read is the watch's
    etcd.fail_reads = 1
    try:
        rep = push(c)
        assert (rep.node, rep.epoch) == ("shard-0/1", 2)
        assert calls[0].cancelled and clock.t < 0.5, f"given up at {clock.t:.2f} s"
    finally:
        c.close()


def test_an_etcd_that_stays_down_is_polled_with_a_backoff_until_the_deadline() -> None:
    cfg, etcd, calls, clock, c = cluster({"shard-0/0": None})
    etcd.down = True
    try:
        with pytest.raises(grpc.RpcError):
            c._call_primary(0, ShardRecord(1, "shard-0/0", []), "Push", ps_pb2.PushRequest(shard=0, epoch=1), 2.0)
        assert clock.t == pytest.approx(2.0), "the call did not run to its deadline"
        # floor 0.15, then backoff 0.1, 0.2, 0.4, 0.4, ...: about 6 reads in 2 s, not 37 (one per 50 ms)
        assert 3 <= etcd.reads <= 8, etcd.reads
        assert c.watch_reads == etcd.reads
    finally:
        c.close()


def test_a_call_to_a_retired_shard_whose_record_is_gone_re_routes_at_once() -> None:
    """A scale-in switched the routing record to shards (0,) and removed shard 1's record while a
    call to shard 1's frozen primary waited: the call is given up and re-routed (StaleRouting),
    not held to its deadline (the old code waited the whole 2 s)."""
    box: list = []

    def retire(call: Call) -> None:
        cfg, etcd = box
        if call.waits == 2:
            etcd.cas(routing_key(cfg), 0, to_json(Routing(1, (0,))))
            etcd.delete(cfg.shard_key(1))
    cfg, etcd, calls, clock, c = cluster({"shard-1/0": None}, retire, shards=2)
    box += [cfg, etcd]
    try:
        with pytest.raises(StaleRouting):
            push(c, shard=1)
        assert calls[0].cancelled and clock.t < 0.5, f"re-routed at {clock.t:.2f} s"
        assert c.routing.shards == (0,)
    finally:
        c.close()


def test_a_record_gone_while_the_shard_is_still_routed_is_no_news() -> None:
    """A missing record of a shard the routing record still names (a re-add about to write it)
    does not cut the call: it is answered."""
    def gone(call: Call) -> None:
        if call.waits == 1:
            etcd.delete(cfg.shard_key(0))
    cfg, etcd, calls, clock, c = cluster({"shard-0/0": 5}, gone)
    try:
        rep = push(c)
        assert rep.node == "shard-0/0" and not calls[0].cancelled
    finally:
        c.close()


def test_a_barrier_pull_looks_at_the_record_less_often_and_is_still_given_up() -> None:
    """A BSP/SSP barrier pull is held by a live primary for as long as the barrier waits (up to
    10 s): it looks at the record every BARRIER_CHECK_S, not every DEPOSED_CHECK_S (the old code
    read etcd every 50 ms for every such pull), and a frozen primary holding one is still given up
    once the record names its successor."""
    cfg, etcd, calls, clock, c = cluster({"shard-0/0": None})
    c.refresh(0)
    before = etcd.reads
    pull = ps_pb2.PullRequest(shard=0, epoch=1, min_clock=3)
    with pytest.raises(grpc.RpcError):                    # a barrier held the whole 2 s: its deadline
        c._call_primary(0, ShardRecord(1, "shard-0/0", []), "Pull", pull, 2.0)
    assert etcd.reads - before <= 10, etcd.reads - before  # (2 - 0.15) / 0.2: 9 reads, not 37
    c.close()

    box: list = []
    cfg, etcd, calls, clock, c = cluster({"shard-0/0": None}, elect_at(3, box))
    box += [cfg, etcd]
    try:
        rep = c.call(0, "Pull", lambda ep: ps_pb2.PullRequest(shard=0, epoch=ep, min_clock=3), timeout=10.0)
        assert rep.node == "shard-0/1" and calls[0].cancelled
        assert clock.t < 0.15 + 3 * BARRIER_CHECK_S, clock.t
    finally:
        c.close()
