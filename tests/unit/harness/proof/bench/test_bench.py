"""The bench's echo ceiling is raw bytes both ways: no protobuf parse on the server or the client."""
from __future__ import annotations

from types import SimpleNamespace

import grpc
import pytest

from pschaos.harness.proof.bench.ps import _median_ratio
from pschaos.harness.machinery.ports import free_ports
from pschaos.psnodes.wire.channels import auth, dial
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc
from pschaos.psnodes.server.servicer import SERVICE, make_server


@pytest.fixture
def echo_server():
    cfg = SimpleNamespace(rpc_timeout_s=2.0, token="tok", peer_token="", max_message_bytes=16 << 20)
    addr = f"127.0.0.1:{free_ports(1)[0]}"
    server = make_server(SimpleNamespace(cfg=cfg), addr, workers=3, reserve=1)
    server.start()
    ch = dial(addr, cfg.max_message_bytes)
    yield ch
    ch.close()
    server.stop(0)


def test_echo_returns_raw_bytes_unparsed(echo_server):
    raw = echo_server.unary_unary(f"/{SERVICE}/Echo")       # no serializers: bytes in, bytes out
    junk = b"\xff\xff\xff\xff not a protobuf message" * 1000   # a protobuf parse would reject this
    assert raw(junk, timeout=5, metadata=auth("tok")) == junk
    big = bytes(4 << 20)
    assert raw(big, timeout=5, metadata=auth("tok")) == big


def test_echo_still_serves_generated_stubs_and_checks_the_token(echo_server):
    stub = ps_pb2_grpc.ParameterServerStub(echo_server)
    assert stub.Echo(ps_pb2.Blob(data=b"abc"), timeout=5, metadata=auth("tok")).data == b"abc"
    with pytest.raises(grpc.RpcError) as e:
        stub.Echo(ps_pb2.Blob(data=b"abc"), timeout=5, metadata=auth("wrong"))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_ratios_are_medians_of_per_round_ratios():
    assert _median_ratio([10, 20, 90], [20, 20, 100]) == 0.9
