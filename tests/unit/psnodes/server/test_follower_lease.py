"""Async mode acks only under the follower lease: every ISR peer accepted a replicate call at our
epoch less than suspect_s - margin ago, so none of them can have suspected us and been promoted.
Without it, a primary deposed by a pause or a partition acked at its old epoch (seen in
async-kill-primary, seed 1: an ack at epoch 2 for a push sent 60 ms after epoch 3 was promoted)."""
import time

import numpy as np
import pytest

from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.errors import ReplicationFailed
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.proto import ps_pb2

PEER = "shard-0/1"


@pytest.fixture
def node(tmp_path):
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1, copies=2, workers=1, mode="async",
                        workdir=str(tmp_path), addresses={"shard-0/0": "127.0.0.1:1", PEER: "127.0.0.1:2"})
    n = ShardNode(cfg, "shard-0/0", dict(cfg.addresses), etcd=None, events=EventLog(None, "shard-0/0"))
    n.become_primary(ShardRecord(epoch=1, primary="shard-0/0", isr=["shard-0/0", PEER]))
    return n


def _push(node, kind=ps_pb2.Update.PUSH, req_id=1, wait=0.1):
    upd = ps_pb2.Update(kind=kind, worker="worker-0", incarnation=1, req_id=req_id,
                        dense=[tensor_to_pb("w", np.ones(3, np.float32))])
    return node.push(ps_pb2.PushRequest(shard=0, epoch=1, update=upd), time.monotonic() + wait)


def test_no_ack_before_every_isr_peer_answered(node):
    with pytest.raises(ReplicationFailed, match="not answered recently"):
        _push(node, ps_pb2.Update.INIT)
    node.peer_heard[PEER] = time.monotonic()
    assert _push(node, ps_pb2.Update.INIT).epoch == 1
    assert _push(node).seq == 2


def test_a_stale_answer_stops_acks(node):
    node.peer_heard[PEER] = time.monotonic()
    _push(node, ps_pb2.Update.INIT)
    node.peer_heard[PEER] = time.monotonic() - node.cfg.suspect_s
    with pytest.raises(ReplicationFailed):
        _push(node)


def test_a_peer_out_of_the_isr_does_not_hold_acks(node):
    node.isr = ["shard-0/0"]
    assert _push(node, ps_pb2.Update.INIT).epoch == 1


def test_a_candidate_replica_renews_no_follower_lease(tmp_path):
    """A replica that posted its candidacy against epoch 1 still applies the old primary's
    entries, but its answer says so, and the primary does not count it as a follower."""
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1, copies=2, workers=1, mode="async",
                        workdir=str(tmp_path), addresses={"shard-0/0": "127.0.0.1:1", PEER: "127.0.0.1:2"})
    r = ShardNode(cfg, PEER, dict(cfg.addresses), etcd=None, events=EventLog(None, PEER))
    with r.cond:
        r.follow(1, "shard-0/0", 0)
    req = ps_pb2.ReplicateRequest(shard=0, epoch=1, primary="shard-0/0", primary_seq=0, epoch_start=0)
    assert r.replicate(req).suspecting is False
    r.suspecting = 1
    assert r.replicate(req).suspecting is True


def test_an_async_ack_needs_the_etcd_lease_too(node):
    """Fresh followers are not enough: past its etcd lease a primary acks nothing (a restore may
    already have taken the shard)."""
    from pschaos.psnodes.errors import NotPrimary
    node.peer_heard[PEER] = time.monotonic()
    _push(node, ps_pb2.Update.INIT)
    node.lease_until = time.monotonic() - 1
    node.peer_heard[PEER] = time.monotonic()
    with pytest.raises(NotPrimary, match="lease"):
        _push(node)


def test_a_lease_that_ends_while_waiting_for_followers_refuses_the_ack(node):
    from pschaos.psnodes.errors import NotPrimary
    node.peer_heard[PEER] = time.monotonic()
    _push(node, ps_pb2.Update.INIT)
    node.peer_heard[PEER] = time.monotonic() - node.cfg.suspect_s          # stale: the push waits
    node.lease_until = time.monotonic() + 0.05                               # and the lease ends meanwhile
    with pytest.raises(NotPrimary, match="lease"):
        _push(node, wait=0.5)
