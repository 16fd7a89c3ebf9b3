"""A replica's probe channel to its primary is connected before the first probe needs it.

On a loaded machine a TCP connect plus the HTTP/2 handshake took longer than a probe's shortest
wait (`probe_s`), so a live primary went unanswered and was replaced (kill-primary seed 5 at load
10: a spurious failover at start-up). `PrimaryProbe.warm` dials when the replica follows.
"""
from __future__ import annotations

import time
from concurrent import futures
from types import SimpleNamespace

import grpc
import pytest

from psnodes.probe import PrimaryProbe
from psnodes.proto import ps_pb2, ps_pb2_grpc


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
