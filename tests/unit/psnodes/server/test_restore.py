"""Restore from checkpoint decided in one process against an in-memory etcd (issue 7, bug 4.5):
nothing changes before the compare-and-swap is won."""
from __future__ import annotations

import json
import time

import numpy as np

from pschaos.psnodes.store.checkpoint import write_checkpoint
from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.replication.election import Elector
from pschaos.psnodes.etcd import KV
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.proto import ps_pb2


class MemEtcd:
    """The subset of pschaos.psnodes.etcd.Etcd the elector uses, in memory; `refuse_cas` loses every swap."""

    def __init__(self) -> None:
        self.kv: dict[str, tuple[bytes, int]] = {}
        self.rev = 0
        self.refuse_cas = False

    def get(self, key: str) -> KV | None:
        v = self.kv.get(key)
        return KV(key, v[0], v[1], 0) if v else None

    def get_prefix(self, prefix: str) -> list[KV]:
        return [KV(k, v, r, 0) for k, (v, r) in sorted(self.kv.items()) if k.startswith(prefix)]

    def put(self, key: str, value, lease: int = 0) -> None:
        self.rev += 1
        self.kv[key] = (value.encode() if isinstance(value, str) else value, self.rev)

    def delete(self, key: str) -> None:
        self.kv.pop(key, None)

    def cas(self, key, expect_mod_revision, value, lease=0, also_put=(), also_compare=()) -> bool:
        if self.refuse_cas:
            return False
        for k, rev in [(key, expect_mod_revision), *also_compare]:
            if (self.kv[k][1] if k in self.kv else 0) != rev:
                return False
        self.put(key, value)
        for k, v, _ in also_put:
            self.put(k, v)
        return True


def make_node(tmp_path, etcd: MemEtcd, name: str = "shard-0/0") -> ShardNode:
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:1", shards=1, copies=2, workers=1,
                        workdir=str(tmp_path), optimizer={"name": "sgd", "lr": 0.1})
    return ShardNode(cfg, name, dict(cfg.addresses), etcd=etcd, events=EventLog(None, name))


def grow(node: ShardNode, n: int, epoch: int = 1) -> None:
    s = node.store
    if "w" not in s.dense:
        u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb("w", np.zeros(4))])
        s.apply(s.validate(u), u.SerializeToString(), epoch)
    for i in range(n):
        u = ps_pb2.Update(worker="worker-0", req_id=s.seq + 1, dense=[tensor_to_pb("w", np.ones(4))])
        s.apply(s.validate(u), u.SerializeToString(), epoch)


def orphaned(tmp_path, refuse: bool) -> tuple[ShardNode, Elector, MemEtcd, ShardRecord, int]:
    """shard-0/0 alive with 3 entries, not in the ISR; the ISR's only copy is gone; the shared
    checkpoint holds 10 entries. Returns the node, its elector, etcd, the record and its revision."""
    etcd = MemEtcd()
    other = make_node(tmp_path, etcd, "shard-0/1")
    grow(other, 10)
    blob, _ = other.store.export_state(0)
    write_checkpoint(other.cfg.checkpoint_dir(0), blob, other.store.seq, 1, "shard-0/1")
    node = make_node(tmp_path, etcd)
    grow(node, 3)
    rec = ShardRecord(epoch=1, primary="shard-0/1", isr=["shard-0/1"])
    etcd.put(node.cfg.shard_key(0), rec.to_json())
    etcd.put(node.cfg.node_key(node.name), json.dumps({"role": "replica", "in_sync": False}))
    el = Elector(node)
    etcd.refuse_cas = refuse
    return node, el, etcd, rec, etcd.get(node.cfg.shard_key(0)).mod_revision


def run_restore(node: ShardNode, el: Elector, rec: ShardRecord, rev: int) -> None:
    """Drive maybe_restore past its waits, as the elector's ticks would."""
    for _ in range(5):
        el.maybe_restore(rec, rev)
        if el.orphan_since is not None:
            el.orphan_since -= 100.0     # the orphan wait is over
        if node.role == "primary":
            return


def test_restore_that_loses_the_swap_changes_nothing(tmp_path):
    node, el, etcd, rec, rev = orphaned(tmp_path, refuse=True)
    before = (node.store.seq, node.store.checksum())
    run_restore(node, el, rec, rev)
    assert node.role != "primary"
    assert (node.store.seq, node.store.checksum()) == before, \
        f"state changed to seq {node.store.seq} although the compare-and-swap was lost"
    assert node.restored_from == ""


def test_restore_that_wins_the_swap_takes_the_newer_checkpoint(tmp_path):
    node, el, etcd, rec, rev = orphaned(tmp_path, refuse=False)
    run_restore(node, el, rec, rev)
    assert node.role == "primary" and node.epoch == 2
    assert node.store.seq == 11 and node.restored_from == "checkpoint@11"
    loss = json.loads(etcd.get(node.cfg.loss_key(0, 2)).value)
    assert loss["restored_seq"] == 11 and loss["previous_epoch"] == 1


def test_a_copy_with_older_state_lets_the_newest_live_copy_restore(tmp_path):
    node, el, etcd, rec, rev = orphaned(tmp_path, refuse=False)
    rec = ShardRecord(epoch=1, primary="shard-0/9", isr=["shard-0/9"])     # the ISR copy is gone
    etcd.put(node.cfg.shard_key(0), rec.to_json())
    rev = etcd.get(node.cfg.shard_key(0)).mod_revision
    etcd.put(node.cfg.node_key("shard-0/1"), json.dumps({"role": "replica", "in_sync": False}))
    etcd.put(node.cfg.restore_prefix(0, 1) + "shard-0/1", json.dumps({"seq": 50, "seq_epoch": 1}))
    run_restore(node, el, rec, rev)
    assert node.role != "primary" and node.restored_from == ""
    assert ShardRecord.from_json(etcd.get(node.cfg.shard_key(0)).value).epoch == 1
    assert json.loads(etcd.get(node.cfg.restore_prefix(0, 1) + node.name).value) == {"seq": 4, "seq_epoch": 1}
