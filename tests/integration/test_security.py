"""Auth, bad input over the wire, message size limits, loopback binding, metrics endpoint."""
import subprocess
import sys
import urllib.request

import grpc
import numpy as np
import pytest

from pschaos.psnodes.wire.codec import rows_to_pb, tensor_to_pb
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc


def primary_stub(be):
    return be.client.stub(be.routing()[0].primary)


def test_wrong_or_missing_token_is_unauthenticated(make_cluster):
    be = make_cluster(shards=1, copies=1)
    stub = primary_stub(be)
    for md in [(), (("x-pschaos-token", "wrong"),)]:
        with pytest.raises(grpc.RpcError) as e:
            stub.Status(ps_pb2.StatusRequest(), timeout=5, metadata=md)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "token" in e.value.details()


BAD = [
    ("dtype", ps_pb2.Update(worker="w", req_id=1, dense=[ps_pb2.Tensor(name="w", shape=[4], dtype="int8",
                                                                       data=bytes(4))]), "dtype"),
    ("shape", ps_pb2.Update(worker="w", req_id=1, dense=[tensor_to_pb("w", np.ones(5))]), "shape"),
    ("nan", ps_pb2.Update(worker="w", req_id=1, dense=[tensor_to_pb("w", np.array([1, np.nan, 0, 0]))]), "NaN"),
    ("table", ps_pb2.Update(worker="w", req_id=1, sparse=[rows_to_pb("nope", np.array([1]), np.ones((1, 4)), 4)]),
     "unknown table"),
    ("negative-id", ps_pb2.Update(worker="w", req_id=1, sparse=[rows_to_pb("emb", np.array([-1]), np.ones((1, 4)), 4)]),
     "negative"),
]


@pytest.mark.parametrize("name,upd,words", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_invalid_argument_and_changes_nothing(make_cluster, name, upd, words):
    be = make_cluster(shards=1, copies=2, tables={"emb": 4})
    be.client.init_dense({"w": np.zeros(4, dtype=np.float32)})
    stub = primary_stub(be)
    before = stub.Status(ps_pb2.StatusRequest(checksum=True), timeout=5, metadata=be.client.md)
    with pytest.raises(grpc.RpcError) as e:
        stub.Push(ps_pb2.PushRequest(shard=0, update=upd), timeout=5, metadata=be.client.md)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert words in e.value.details()
    after = stub.Status(ps_pb2.StatusRequest(checksum=True), timeout=5, metadata=be.client.md)
    assert (after.seq, after.checksum) == (before.seq, before.checksum)


def test_oversized_message_is_refused(make_cluster):
    be = make_cluster(shards=1, copies=1)
    be.client.init_dense({"w": np.zeros(4, dtype=np.float32)})
    # a channel that would send more than the server's limit (256 MiB by default is too big to
    # test here: dial a fresh channel and send 300 MiB of Echo is wasteful) - use a small server
    cfg = be.cfg
    ch = grpc.insecure_channel(cfg.addresses[be.routing()[0].primary],
                               options=[("grpc.max_send_message_length", 512 << 20)])
    stub = ps_pb2_grpc.ParameterServerStub(ch)
    with pytest.raises(grpc.RpcError) as e:
        stub.Echo(ps_pb2.Blob(data=bytes(cfg.max_message_bytes + 1024)), timeout=30, metadata=be.client.md)
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    ch.close()


def test_metrics_endpoint_serves_role_epoch_and_counters(make_cluster):
    be = make_cluster(shards=1, copies=2)
    be.client.init_dense({"w": np.zeros(4, dtype=np.float32)})
    prim = be.routing()[0].primary
    body = urllib.request.urlopen(f"http://127.0.0.1:{be.cfg.metrics_ports[prim]}/metrics", timeout=5).read().decode()
    assert 'ps_role{role="primary"} 1.0' in body and "ps_epoch 1.0" in body
    assert "ps_pushes_total" in body and "ps_replication_lag_entries" in body


def test_node_refuses_a_non_loopback_address(tmp_path):
    cfg = ClusterConfig(cluster_id="x", etcd="http://127.0.0.1:1", shards=1, copies=1,
                        addresses={"shard-0/0": "0.0.0.0:5555"})
    cfg.save(tmp_path / "c.json")
    out = subprocess.run([sys.executable, "-m", "pschaos.psnodes.serve", "--config", str(tmp_path / "c.json"),
                          "--name", "shard-0/0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "127.0.0.1" in out.stderr and "addresses" in out.stderr


def test_replicate_needs_the_peer_token_that_workers_are_not_given(make_cluster):
    from pschaos.psnodes.wire.channels import auth

    be = make_cluster(shards=1, copies=2)
    rec = be.routing()[0]
    rep = next(n for n in be.cfg.shard_nodes(0) if n != rec.primary)
    stub = be.client.stub(rep)
    heartbeat = ps_pb2.ReplicateRequest(shard=0, epoch=rec.epoch, primary=rec.primary)
    with pytest.raises(grpc.RpcError) as e:
        stub.Replicate(heartbeat, timeout=5, metadata=be.client.md)       # the cluster token alone
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED and "peer" in e.value.details()
    assert be.cfg.peer_token and ClusterConfig.load(be.client_config_path).peer_token == ""
    ok = stub.Replicate(heartbeat, timeout=5, metadata=auth(be.cfg.token, be.cfg.peer_token))
    assert ok.epoch == rec.epoch
