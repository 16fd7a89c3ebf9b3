"""A replica's probe channel to its primary is connected before the first probe needs it.

On a loaded machine a TCP connect plus the HTTP/2 handshake took longer than a probe's shortest
wait (`probe_s`), so a live primary went unanswered and was replaced (kill-primary seed 5 at load
10: a spurious failover at start-up). `PrimaryProbe.warm` dials when the replica follows.
"""
from __future__ import annotations

import threading
import time
from concurrent import futures
from types import SimpleNamespace

import grpc
import pytest

from pschaos.psnodes.replication.probe import PrimaryProbe
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc


class _Primary(ps_pb2_grpc.ParameterServerServicer):
    def Status(self, request, context):
        return ps_pb2.StatusReply(role="primary", epoch=3)


@pytest.fixture
def primary():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    ps_pb2_grpc.add_ParameterServerServicer_to_server(_Primary(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(0)


def _node(address: str) -> SimpleNamespace:
    return SimpleNamespace(links={"shard-0/0": address}, cfg=SimpleNamespace(token="t", max_message_bytes=1 << 20))


def _state(ch: grpc.Channel) -> grpc.ChannelConnectivity:
    """The channel's state, read without asking it to connect."""
    seen: list[grpc.ChannelConnectivity] = []
    ch.subscribe(seen.append, try_to_connect=False)
    end = time.monotonic() + 1.0
    while not seen and time.monotonic() < end:
        time.sleep(0.005)
    ch.unsubscribe(seen.append)
    return seen[-1]


def test_following_a_primary_connects_the_probe_channel_before_any_probe(primary):
    probe = PrimaryProbe(_node(primary))
    try:
        probe.warm("shard-0/0")
        assert len(probe.channels) == 1, "warm() dialled no channel to the followed primary"
        end = time.monotonic() + 5.0
        while _state(probe.channels[0]) != grpc.ChannelConnectivity.READY and time.monotonic() < end:
            time.sleep(0.02)
        assert _state(probe.channels[0]) == grpc.ChannelConnectivity.READY
        probe.warm("shard-0/0")
        assert len(probe.channels) == 1, "a second warm() dialled again"
        assert probe.clears("shard-0/0", 3, timeout=2.0)        # the probe reuses the warm channel
        assert len(probe.channels) == 1
    finally:
        probe.close()


def test_warm_ignores_no_primary_and_unknown_nodes(primary):
    probe = PrimaryProbe(_node(primary))
    probe.warm("")
    probe.warm("shard-9/9")
    assert probe.channels == []
    probe.close()


class _Peers(_Primary):
    """Records the client address of every Status call (one per TCP connection)."""

    def __init__(self) -> None:
        self.peers: set[str] = set()

    def Status(self, request, context):
        self.peers.add(context.peer())
        time.sleep(0.3)             # every path's call is in flight before the first answer
        return super().Status(request, context)


def test_a_probe_asks_over_separate_connections_and_any_answer_holds():
    """Three paths are three TCP connections (gRPC would otherwise share one among channels to the
    same address, and one lost packet would stall every path alike)."""
    servicer = _Peers()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    ps_pb2_grpc.add_ParameterServerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    node = _node(f"127.0.0.1:{port}")
    node.cfg.probe_paths = 3
    probe = PrimaryProbe(node)
    try:
        assert probe.clears("shard-0/0", 3, timeout=2.0)
        deadline = time.monotonic() + 2.0
        while len(servicer.peers) < 3 and time.monotonic() < deadline:   # the other paths' calls land too
            time.sleep(0.01)
        assert len(probe.channels) == 3 and len(servicer.peers) == 3, servicer.peers
        assert not probe.clears("shard-0/0", 4, timeout=2.0)      # primary of another epoch: no hold
    finally:
        probe.close()
        server.stop(0)


def test_a_probe_of_a_dead_primary_fails_fast_on_every_path():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")     # a port nobody listens on once stopped
    node = _node(f"127.0.0.1:{port}")
    node.cfg.probe_paths = 3
    probe = PrimaryProbe(node)
    try:
        t0 = time.monotonic()
        assert not probe.clears("shard-0/0", 3, timeout=5.0)
        assert time.monotonic() - t0 < 4.0, "a refused connection must not wait for the deadline"
    finally:
        probe.close()


def _closed(ch: grpc.Channel) -> bool:
    """A closed channel refuses every new call."""
    try:
        ch.unary_unary("/pschaos.ps.ParameterServer/Status").future(b"", timeout=0.1).cancel()
    except ValueError:
        return True
    return False


def test_following_a_new_primary_closes_the_old_ones_channels(primary):
    """Kept, a killed primary's channels were re-dialled every 200 ms for as long as the replica
    ran, one set per primary it ever followed (detector review 2, L2)."""
    node = _node(primary)
    node.links["shard-0/1"] = primary
    node.cfg.probe_paths = 3
    probe = PrimaryProbe(node)
    try:
        probe.warm("shard-0/0")
        old = list(probe.channels)
        assert len(old) == 3 and not any(_closed(ch) for ch in old)
        probe.warm("shard-0/1")
        assert all(_closed(ch) for ch in old), "the old primary's probe channels were left open"
        assert len(probe.channels) == 3 and not any(_closed(ch) for ch in probe.channels)
        assert probe.clears("shard-0/1", 3, timeout=2.0)
        assert probe.clears("shard-0/0", 3, timeout=2.0)      # a probe of another primary dials it again
        assert len(probe.channels) == 3
    finally:
        probe.close()


def test_the_elector_closes_the_probe_channels_when_the_node_stops(primary):
    from pschaos.psnodes.config import ClusterConfig
    from pschaos.psnodes.replication.election import Elector

    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1, copies=2, workers=1)
    stopping = threading.Event()
    node = SimpleNamespace(cfg=cfg, links={"shard-0/0": primary}, role="primary", stopping=stopping)
    elector = Elector(node)
    elector.probe.warm("shard-0/0")
    chans = list(elector.probe.channels)
    assert chans and not any(_closed(ch) for ch in chans)
    stopping.set()
    elector.run()                         # returns at its first wait: the node stopped
    assert all(_closed(ch) for ch in chans)


def test_a_replica_promoted_closes_its_probe_channels_to_the_old_primary(primary):
    """Final review of issue 13, L2: switching primaries and stopping closed them, a promotion did
    not: a replica promoted after probing its dead primary re-dialled it for as long as it ran."""
    from pschaos.psnodes.config import ClusterConfig
    from pschaos.psnodes.replication.election import Elector

    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1, copies=2, workers=1)
    node = SimpleNamespace(cfg=cfg, links={"shard-0/0": primary}, role="primary", stopping=threading.Event(),
                           lease_seen=time.monotonic(), peer_heard={})
    elector = Elector(node)
    elector.probe.warm("shard-0/0")              # probed as a replica, then promoted
    chans = list(elector.probe.channels)
    assert chans and not any(_closed(ch) for ch in chans)
    elector.doubts = lambda now: False           # a primary whose replicas answer
    elector.step(time.monotonic())
    assert all(_closed(ch) for ch in chans) and elector.probe.channels == []
