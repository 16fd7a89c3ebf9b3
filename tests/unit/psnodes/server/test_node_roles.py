"""A shard node's role decisions in one process, without gRPC or etcd: when a replica counts as in
sync with its primary (issue 7, bug 4.6)."""
from __future__ import annotations

import numpy as np
import pytest

from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.proto import ps_pb2


def make_node(tmp_path, name: str = "shard-0/1", copies: int = 2) -> ShardNode:
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:1", shards=1, copies=copies, workers=1,
                        workdir=str(tmp_path), optimizer={"name": "sgd", "lr": 0.1})
    return ShardNode(cfg, name, dict(cfg.addresses), etcd=None, events=EventLog(None, name))


def apply_history(node: ShardNode, epochs: list[int]) -> None:
    """Give the node's store one INIT then one push per epoch in `epochs` (seq 1..len)."""
    s = node.store
    u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb("w", np.zeros(4))])
    s.apply(s.validate(u), u.SerializeToString(), epochs[0])
    for i, ep in enumerate(epochs[1:], start=1):
        u = ps_pb2.Update(worker="worker-0", req_id=i, dense=[tensor_to_pb("w", np.full(4, float(i)))])
        s.apply(s.validate(u), u.SerializeToString(), ep)


def heartbeat(epoch: int, primary_seq: int, epoch_start: int, **kw) -> ps_pb2.ReplicateRequest:
    return ps_pb2.ReplicateRequest(shard=0, epoch=epoch, primary="shard-0/0", primary_seq=primary_seq,
                                   epoch_start=epoch_start, **kw)


def test_equal_seq_on_a_divergent_history_is_not_in_sync(tmp_path):
    # the replica restarted from a checkpoint at seq 5 written in epoch 1; the primary of epoch 2
    # began at seq 3 and is at seq 5 too, with entries 4..5 of its own epoch: same seq, other history
    node = make_node(tmp_path)
    apply_history(node, [1, 1, 1, 1, 1])
    node.replicate(heartbeat(epoch=2, primary_seq=5, epoch_start=3))
    assert node.store.seq == 5
    assert not node.in_sync, "a copy whose last entry (seq 5, epoch 1) differs from the primary's counted as in sync"


def test_same_last_entry_is_in_sync(tmp_path):
    node = make_node(tmp_path)
    apply_history(node, [1, 1, 1, 2, 2])
    node.replicate(heartbeat(epoch=2, primary_seq=5, epoch_start=3, primary_seq_epoch=2))
    assert node.in_sync


def test_primary_without_the_last_entry_epoch_never_makes_a_copy_in_sync(tmp_path):
    # a request that does not say its last entry's epoch (0) proves nothing beyond seq 0
    node = make_node(tmp_path)
    apply_history(node, [1, 1, 1])
    node.replicate(heartbeat(epoch=1, primary_seq=3, epoch_start=0))
    assert not node.in_sync


def test_replicate_encoder_carries_the_last_entry_epoch():
    from pschaos.psnodes.wire.wire import encode_replicate

    req = ps_pb2.ReplicateRequest.FromString(encode_replicate(0, 3, "shard-0/0", [], 9, 7, b"", 2))
    assert (req.primary_seq, req.primary_seq_epoch, req.epoch_start) == (9, 2, 7)


def test_primary_past_its_lease_refuses_and_steps_down(tmp_path):
    """Bug 4.2: once the etcd lease may have expired, the primary serves nothing and steps down."""
    import time

    from pschaos.psnodes.config import ShardRecord
    from pschaos.psnodes.errors import NotPrimary

    node = make_node(tmp_path, "shard-0/0", copies=1)
    node.become_primary(ShardRecord(epoch=1, primary="shard-0/0", isr=["shard-0/0"]))
    node.renew_lease(time.monotonic(), node.cfg.lease_ttl_s)
    node.pull(ps_pb2.PullRequest(shard=0, epoch=1, min_clock=-1), time.monotonic() + 1)   # served
    node.lease_until = time.monotonic() - 0.01
    with pytest.raises(NotPrimary, match="lease"):
        node.pull(ps_pb2.PullRequest(shard=0, epoch=1, min_clock=-1), time.monotonic() + 1)
    assert node.lease_lost("test") and node.role == "replica" and node.epoch == 1


def test_the_promote_event_names_the_seq_held_at_the_promotion_not_one_applied_after(tmp_path):
    """A push of the new epoch may apply the moment become_primary releases the lock; the promote
    event read the store's seq after that, so an ack of an entry the new primary never held (an
    early ack at the old epoch) looked held to acks-durable and reads-committed (review of issue
    32, finding 4). The gap is made certain here: the first call after the lock (the role
    metric) applies one push."""
    from pschaos.psnodes.config import ShardRecord

    node = make_node(tmp_path)
    apply_history(node, [1, 1, 1])
    seen: list[dict] = []
    node.events.emit = lambda kind, value: seen.append(value) if kind == "promote" else None
    set_role = node.metrics.set_role

    def push_lands(role: str) -> None:
        set_role(role)
        if role == "primary":
            apply_history_one(node, 4, epoch=2)
    node.metrics.set_role = push_lands
    node.become_primary(ShardRecord(epoch=2, primary=node.name, isr=[node.name], start_seq=3))
    assert node.store.seq == 4
    assert [e["seq"] for e in seen] == [3], seen


def apply_history_one(node: ShardNode, req_id: int, epoch: int) -> None:
    u = ps_pb2.Update(worker="worker-0", req_id=req_id, dense=[tensor_to_pb("w", np.full(4, 1.0))])
    node.store.apply(node.store.validate(u), u.SerializeToString(), epoch)
