"""Incremental catch-up of a restarted replica, and restore from checkpoint when every copy is lost."""
import json
import shutil
import time

import numpy as np

from harness.history import read_events
from harness.procs import wait_until
from psnodes.etcd import Etcd

from .pushers import PUSHER_KEY, applied_contains, start_load
from .test_failover import settle


def test_restarted_replica_catches_up_by_delta(make_cluster):
    be = make_cluster(shards=1, copies=2, replication="sync", tables={"emb": 8})
    p = start_load(be, 1.5, ids=True)
    rep = next(n for n in be.cfg.shard_nodes(0) if n != be.routing()[0].primary)
    be.stop(rep)                                  # graceful: writes its local checkpoint
    n0 = len(p.acked)
    assert wait_until(lambda: len(p.acked) > n0 + 50, 20, 0.05)
    p.stop()
    be.restart(rep)
    sts = settle(be)
    assert len({s.checksum for s in sts}) == 1
    syncs = [e["value"] for e in read_events(be.events_path(be.routing()[0].primary)) if e["f"] == "sync"]
    mine = [s for s in syncs if s["dst"] == rep]
    assert mine, f"no sync event for {rep}: {syncs}"
    s = mine[-1]
    assert s["kind"] in ("delta", "log") and s["from_seq"] > 0
    assert s["bytes"] <= 1.1 * s["changed_bytes"], s
    assert s["bytes"] < 0.5 * s["snapshot_bytes"], s
    assert rep in be.routing()[0].isr


def test_all_copies_lost_restores_from_checkpoint_and_reports_it(make_cluster):
    be = make_cluster(shards=1, copies=2, replication="sync")
    p = start_load(be, 0.5)
    prim = be.routing()[0].primary
    snap = be.client.stub(prim).Snapshot(__import__("psnodes.proto.ps_pb2", fromlist=["x"]).SnapshotRequest(shard=0),
                                         timeout=5, metadata=be.client.md)
    time.sleep(0.3)
    p.stop()
    for n in be.cfg.shard_nodes(0):
        be.kill(n)
        shutil.rmtree(be.cfg.data_dir(n), ignore_errors=True)   # their disks are gone too
    old_epoch = be.routing()[0].epoch
    for n in be.cfg.shard_nodes(0):
        be.restart(n)
    assert wait_until(lambda: be.routing()[0].epoch > old_epoch, 30, 0.1), "shard never came back"
    rec = be.routing()[0]
    st = be.status(rec.primary, applied=True)
    assert st.restored_from == f"checkpoint@{snap.seq}" and st.seq == snap.seq
    loss = Etcd(be.cfg.etcd).get(be.cfg.loss_key(0, rec.epoch))
    assert loss is not None
    loss = json.loads(loss.value)
    assert loss["restored_seq"] == snap.seq and loss["previous_epoch"] == old_epoch
    applied = json.loads(st.applied_json).get(PUSHER_KEY, [])
    lost = [r for r, _, seq, _ in p.acked if not applied_contains(applied, r)]
    kept = [r for r, _, seq, _ in p.acked if seq <= snap.seq]
    assert all(applied_contains(applied, r) for r in kept)
    assert len(lost) == len([a for a in p.acked if a[2] > snap.seq])   # exactly the post-checkpoint acks
    events = read_events(be.events_path(rec.primary))
    assert any(e["f"] == "restore" for e in events)
