"""A copy that restores its shard (every ISR copy lost) from a checkpoint taken before a migration's
fence or switch must not serve the keys the routing record in etcd says moved away (review 1d).

The restored state carries the routing it had when the checkpoint was written: epoch E, keys it
has since given away, no fence. Before it serves, it adopts the record as it stood at its
compare-and-swap (the swap compares the routing key too): a ROUTE entry to the record's epoch, a
FENCE when the record holds a fenced migration it is a source of, an UNFENCE of a migration the
record no longer holds (aborted). In-process, against an in-memory etcd.
"""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

from pschaos.psnodes.elastic import routing
from pschaos.psnodes.store.checkpoint import write_checkpoint
from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.core.routing import Migration, Routing
from pschaos.psnodes.replication.election import Elector
from pschaos.psnodes.errors import StaleRouting
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.placement import owner
from pschaos.psnodes.proto import ps_pb2
from tests.unit.psnodes.server.test_restore import MemEtcd, run_restore

MOVES = "layer24.weight"      # shard 0 under (0, 1), shard 2 under (0, 1, 2)
STAYS = "layer2.weight"       # shard 0 under both
SRC, DST = (0, 1), (0, 1, 2)


def test_the_names_move_as_the_tests_assume():
    assert (owner(MOVES, SRC), owner(MOVES, DST)) == (0, 2)
    assert (owner(STAYS, SRC), owner(STAYS, DST)) == (0, 0)


def make_node(tmp_path, etcd, name: str) -> ShardNode:
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:1", shards=2, copies=2, workers=1,
                        workdir=str(tmp_path), optimizer={"name": "sgd", "lr": 0.1})
    return ShardNode(cfg, name, dict(cfg.addresses), etcd=etcd, events=EventLog(tmp_path / f"{name[-1]}.jsonl", name))


def apply(node: ShardNode, upd: ps_pb2.Update) -> None:
    node.store.apply(node.store.validate(upd), upd.SerializeToString(), 1)


def orphaned(tmp_path, record: Routing, fence: str = "", etcd: MemEtcd | None = None):
    """shard-0/1 held MOVES and STAYS at routing epoch 0 and wrote the shared checkpoint (fenced for
    migration `fence` when given), then the whole ISR (it) was lost; the routing record in etcd is
    `record`. shard-0/0 starts empty and restores. Returns it, its elector, the record, its revision."""
    etcd = etcd or MemEtcd()
    other = make_node(tmp_path, etcd, "shard-0/1")
    apply(other, ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb(n, np.zeros(4)) for n in (MOVES, STAYS)]))
    apply(other, ps_pb2.Update(worker="worker-0", req_id=1, dense=[tensor_to_pb(MOVES, np.ones(4))]))
    if fence:
        meta = json.dumps({"migration": fence, "src": list(SRC), "dst": list(DST)}).encode()
        apply(other, ps_pb2.Update(kind=ps_pb2.Update.FENCE, meta=meta))
    blob, _ = other.store.export_state(0)
    write_checkpoint(other.cfg.checkpoint_dir(0), blob, other.store.seq, 1, "shard-0/1")
    node = make_node(tmp_path, etcd, "shard-0/0")
    rec = ShardRecord(epoch=1, primary="shard-0/1", isr=["shard-0/1"])
    etcd.put(node.cfg.shard_key(0), rec.to_json())
    etcd.put(node.cfg.node_key(node.name), json.dumps({"role": "replica", "in_sync": False}))
    etcd.put(routing.key(node.cfg), routing.to_json(record))
    return node, Elector(node), rec, etcd.get(node.cfg.shard_key(0)).mod_revision


def push(node: ShardNode, name: str, routing_epoch: int, req_id: int) -> ps_pb2.PushReply:
    upd = ps_pb2.Update(worker="worker-0", req_id=req_id, dense=[tensor_to_pb(name, np.ones(4))])
    req = ps_pb2.PushRequest(shard=0, epoch=node.epoch, routing_epoch=routing_epoch, update=upd)
    return node.push(req, time.monotonic() + 1.0)


def events(tmp_path, f: str) -> list[dict]:
    lines = (tmp_path / "0.jsonl").read_text().splitlines()
    return [e["value"] for e in map(json.loads, lines) if e["f"] == f]


def test_a_restore_after_the_switch_never_acks_a_moved_key(tmp_path):
    node, el, rec, rev = orphaned(tmp_path, Routing(1, DST))
    run_restore(node, el, rec, rev)
    assert node.role == "primary" and node.restored_from.startswith("checkpoint@")
    with pytest.raises(StaleRouting):
        push(node, MOVES, 0, 10)               # a client still routing by epoch 0
    with pytest.raises(StaleRouting):
        push(node, STAYS, 0, 11)               # every call by the old epoch is stale now
    assert (node.store.routing_epoch, node.store.shards) == (1, DST)
    assert MOVES not in node.store.dense
    rep = push(node, STAYS, 1, 12)
    assert rep.routing_epoch == 1 and not rep.duplicate
    (ev,) = events(tmp_path, "restore-routing")
    assert ev["routing_epoch"] == 1 and ev["shards"] == list(DST) and ev["epoch"] == 2


def test_a_restore_during_the_hand_off_fences_itself_again(tmp_path):
    mig = Migration("0.7.ab", SRC, DST, "fenced")
    node, el, rec, rev = orphaned(tmp_path, Routing(0, SRC, mig))
    run_restore(node, el, rec, rev)
    assert node.role == "primary"
    with pytest.raises(StaleRouting, match="moving off shard 0"):
        push(node, MOVES, 0, 10)
    assert push(node, STAYS, 0, 11).routing_epoch == 0
    assert node.store.fence == {"migration": "0.7.ab", "src": list(SRC), "dst": list(DST)}
    # the fence point single-owner judges acks against: in the restored epoch, at the FENCE's seq
    (pt,) = events(tmp_path, "migrate-fenced")
    assert pt == {"shard": 0, "migration": "0.7.ab", "seq": node.store.seq - 1, "epoch": 2}


def test_a_restore_before_the_fence_stays_unfenced_the_coordinator_fences_it_later(tmp_path):
    mig = Migration("0.7.ab", SRC, DST, "copy")
    node, el, rec, rev = orphaned(tmp_path, Routing(0, SRC, mig))
    run_restore(node, el, rec, rev)
    assert node.store.fence is None and push(node, MOVES, 0, 10).routing_epoch == 0
    assert events(tmp_path, "restore-routing") == []


def test_a_fence_of_an_aborted_migration_is_lifted_on_restore(tmp_path):
    node, el, rec, rev = orphaned(tmp_path, Routing(0, SRC), fence="0.3.cd")
    run_restore(node, el, rec, rev)
    assert node.role == "primary" and node.store.fence is None
    assert push(node, MOVES, 0, 10).routing_epoch == 0     # no coordinator is left to lift it


class SwitchBeforeSwap(MemEtcd):
    """A switch of the routing record lands between the restorer's read of it and its swap."""

    def __init__(self, cfg: ClusterConfig) -> None:
        super().__init__()
        self.routing_key, self.shard_key, self.armed = routing.key(cfg), cfg.shard_key(0), False

    def cas(self, key, expect_mod_revision, value, lease=0, also_put=(), also_compare=()) -> bool:
        if self.armed and key == self.shard_key:
            self.armed = False
            self.put(self.routing_key, routing.to_json(Routing(1, DST)))
        return super().cas(key, expect_mod_revision, value, lease, also_put, also_compare)


def test_a_routing_switch_between_the_read_and_the_swap_makes_the_restore_lose(tmp_path):
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:1", shards=2, copies=2, workers=1,
                        workdir=str(tmp_path))
    etcd = SwitchBeforeSwap(cfg)
    node, el, rec, rev = orphaned(tmp_path, Routing(0, SRC), etcd=etcd)
    assert (etcd.routing_key, etcd.shard_key) == (routing.key(node.cfg), node.cfg.shard_key(0))
    etcd.armed = True
    el.maybe_restore(rec, rev)
    el.orphan_since -= 100.0
    el.maybe_restore(rec, rev)          # reads routing epoch 0; the switch lands; the swap must fail
    assert etcd.armed is False, "the restore never tried its compare-and-swap"
    assert node.role != "primary" and node.restored_from == ""
    run_restore(node, el, rec, rev)     # the next tick reads the switched record and restores by it
    assert node.role == "primary" and node.store.routing_epoch == 1
