"""Incremental catch-up of a restarted replica, and restore from checkpoint when every copy is lost."""
import json
import shutil
import time

import numpy as np
import pytest

from pschaos.harness.history.events import read_events
from pschaos.harness.machinery.procs import wait_until
from pschaos.psnodes.etcd import Etcd

from .pushers import PUSHER_KEY, applied_contains, start_load
from .test_failover import settle


@pytest.mark.long
def test_restarted_replica_catches_up_by_delta(make_cluster):
    """`make test-long` only: replica-restart-catchup restarts a replica on processes in `make test`
    and holds its catch-up to the same bounds (catch-up-by-delta: catchup_ratio 1.1, catchup_vs_snapshot 0.5)."""
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
    snap = be.client.stub(prim).Snapshot(__import__("pschaos.psnodes.proto.ps_pb2", fromlist=["x"]).SnapshotRequest(shard=0),
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


def test_restore_takes_the_newest_live_copy_not_the_lowest_slot(make_cluster):
    """Issue 7 bug 4.5: every copy is lost; slots 0 and 1 come back with empty disks, slot 2 with a
    local checkpoint newer than the shared one. The shard must come back with slot 2's state, not
    with the shared checkpoint that the lowest live slot would take."""
    from pschaos.psnodes.config import ShardRecord
    from pschaos.psnodes.proto import ps_pb2

    be = make_cluster(shards=1, copies=3, replication="sync")
    p = start_load(be, 0.5)
    rec = be.routing()[0]
    shared = be.client.stub(rec.primary).Snapshot(ps_pb2.SnapshotRequest(shard=0), timeout=5, metadata=be.client.md)
    n0 = len(p.acked)
    assert wait_until(lambda: len(p.acked) > n0 + 100, 20, 0.05)
    p.stop()
    slot0, slot1, slot2 = be.cfg.shard_nodes(0)
    assert rec.primary == slot0
    assert wait_until(lambda: (s := be.status(slot2)) is not None and s.seq == be.status(slot0).seq, 10, 0.05)
    newest = be.client.stub(slot2).Snapshot(ps_pb2.SnapshotRequest(shard=0), timeout=5, metadata=be.client.md)
    assert newest.seq > shared.seq and newest.path == str(be.cfg.data_dir(slot2))
    etcd = Etcd(be.cfg.etcd)
    for n in (slot0, slot1, slot2):
        be.kill(n)
    for n in (slot0, slot1):
        shutil.rmtree(be.cfg.data_dir(n), ignore_errors=True)   # their disks are gone
        be.restart(n)
    # slot 2 comes back once the others are up and its old incarnation's lease is gone
    assert wait_until(lambda: etcd.get(be.cfg.node_key(slot2)) is None, 10, 0.05)
    be.restart(slot2)
    assert wait_until(lambda: be.routing()[0].epoch > rec.epoch, 30, 0.1), "shard never came back"
    new = ShardRecord.from_json(etcd.get(be.cfg.shard_key(0)).value)
    st = be.status(new.primary, applied=True)
    assert (new.primary, st.seq) == (slot2, newest.seq), \
        f"restored by {new.primary} at seq {st.seq} ({st.restored_from}); slot 2 held seq {newest.seq}, " \
        f"the shared checkpoint seq {shared.seq}"
    applied = json.loads(st.applied_json).get(PUSHER_KEY, [])
    assert all(applied_contains(applied, r) for r, _, seq, _ in p.acked if seq <= newest.seq)


def _manifest(be) -> dict | None:
    from pschaos.psnodes.store.checkpoint import MANIFEST

    try:
        return json.loads((be.cfg.checkpoint_dir(0) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def test_stale_primary_never_regresses_the_shared_checkpoint(make_cluster, pschaos_nemesis):
    """Issue 7 bug 4.3: a primary cut off from its replicas still believes it is primary for a
    while; a checkpoint it writes then (here by Snapshot) must not replace the shared checkpoint of
    the epoch that took over. Then every copy is lost: the restore takes the newest checkpoint.

    A primary whose replicas go silent reads the shard record every heartbeat and steps down once
    it names a successor, so the window is made by cutting it from etcd too (from the start: its
    lease, TTL 2 s, still holds while the successor takes over); its etcd link heals just before
    the Snapshot, whose publish check reads the record, and the Snapshot comes before its elector
    can act on what it reads."""
    from pschaos.psnodes.wire.codec import tensor_to_pb
    from pschaos.psnodes.proto import ps_pb2

    from .test_failover import etcd_record

    be = make_cluster(shards=1, copies=3, replication="sync", proxied=True, checkpoint_interval_s=0.2)
    be.client.init_dense({"w": np.zeros(64, dtype=np.float32)})
    acked = []

    def push(node: str, epoch: int, req: int):
        u = ps_pb2.Update(worker="worker-0", req_id=req, dense=[tensor_to_pb("w", np.full(64, 1e-3))])
        r = be.client.stub(node).Push(ps_pb2.PushRequest(shard=0, epoch=epoch, update=u), timeout=3,
                                      metadata=be.client.md)
        acked.append((req, r.epoch, r.seq))

    old = etcd_record(be)
    for i in range(1, 21):
        push(old.primary, old.epoch, i)
    pschaos_nemesis.inject(be, "partition", f"{old.primary} <-> replicas(shard=0)")
    cut_etcd = pschaos_nemesis.inject(be, "partition", f"{old.primary} -> etcd")   # so it cannot learn it is deposed
    assert wait_until(lambda: (r := etcd_record(be)) is not None and r.epoch > old.epoch, 10, 0.02)
    new = etcd_record(be)
    for i in range(21, 41):
        push(new.primary, new.epoch, i)
    assert wait_until(lambda: (m := _manifest(be)) is not None and m["epoch"] == new.epoch
                      and m["seq"] == acked[-1][2], 5, 0.01), f"no shared checkpoint of epoch {new.epoch}"
    before = _manifest(be)
    st = be.status(old.primary)
    assert st.role == "primary" and st.epoch == old.epoch, "the cut-off primary already knows it is deposed"
    pschaos_nemesis.heal(cut_etcd)
    be.client.stub(old.primary).Snapshot(ps_pb2.SnapshotRequest(shard=0), timeout=5, metadata=be.client.md)
    after = _manifest(be)
    assert (after["epoch"], after["seq"]) >= (before["epoch"], before["seq"]), \
        f"the deposed primary {old.primary} replaced the shared checkpoint {before} with {after}"
    assert (be.cfg.checkpoint_dir(0) / after["file"]).exists()
    # every copy is lost, disks too: the shard comes back from the newest shared checkpoint
    for n in be.cfg.shard_nodes(0):
        be.kill(n)
        shutil.rmtree(be.cfg.data_dir(n), ignore_errors=True)
    for n in be.cfg.shard_nodes(0):
        be.restart(n)
    assert wait_until(lambda: (r := etcd_record(be)) is not None and r.epoch > new.epoch, 30, 0.1)
    back = etcd_record(be)
    st = be.status(back.primary, applied=True)
    assert st.seq == after["seq"] and st.restored_from == f"checkpoint@{after['seq']}", st
    applied = json.loads(st.applied_json).get(PUSHER_KEY, [])
    assert all(applied_contains(applied, r) for r, ep, seq in acked if ep == new.epoch), \
        f"acked pushes of epoch {new.epoch} missing after the restore: {applied}"
