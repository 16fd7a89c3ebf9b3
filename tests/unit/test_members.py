"""psnodes.members against an etcd model (harness/sim/etcd.py: etcd's revisions, transactions and
leases): a leaving worker is never admitted again by a reconcile that runs in between, and a
reconcile admits only registrations that still exist."""
import simpy

from harness.sim.etcd import SimEtcd
from psnodes.config import ClusterConfig
from psnodes.core import membership
from psnodes.events import EventLog
from psnodes.members import (WorkerMembership, encode, joined_still_registered, live_key, parse, plan, prefix,
                             record_key)
from psnodes.runtime import Runtime

CFG = ClusterConfig(cluster_id="m", etcd="sim://etcd", workers=2)


def reconcile_once(etcd: SimEtcd, front: int) -> bool:
    """One primary's poll, as psnodes/member_watch.py makes it."""
    snap = parse(etcd.get_prefix(prefix(CFG)), CFG)
    _, write = plan(snap, True, front, CFG.workers)
    if write is None:
        return False
    rec, changes = write
    return etcd.cas(record_key(CFG), snap.revision, encode(rec),
                    also_compare=joined_still_registered(CFG, snap, changes))


def record(etcd: SimEtcd) -> membership.Record:
    return parse(etcd.get_prefix(prefix(CFG)), CFG).record


def register(etcd: SimEtcd, name: str) -> int:
    lease = etcd.grant(2)
    etcd.put(live_key(CFG, name), "{}", lease=lease)
    return lease


class RaceAfterCas(SimEtcd):
    """etcd where a shard primary's reconcile lands right after the worker's compare-and-swap."""

    def cas(self, *args, **kw):
        won = super().cas(*args, **kw)
        if won and "also_compare" not in kw:        # the worker's, not a reconcile's
            reconcile_once(self, front=50)
        return won


def test_a_leaving_worker_is_not_admitted_again_by_a_reconcile_between_its_steps():
    etcd = RaceAfterCas(simpy.Environment())
    leases = {w: register(etcd, w) for w in ("worker-0", "worker-1")}
    assert reconcile_once(etcd, front=0)
    m = WorkerMembership(CFG, "worker-1", etcd, Runtime(sleep=lambda s: None), EventLog(None, "worker-1"), 1)
    m.lease = leases["worker-1"]
    m.leave()
    rec = record(etcd)
    assert sorted(rec.members) == ["worker-0"] and rec.generation == 2      # left once, not re-joined at 50
    assert etcd.get(live_key(CFG, "worker-1")) is None


def test_a_reconcile_admits_no_registration_that_went_away_after_it_read():
    etcd = SimEtcd(simpy.Environment())
    for w in ("worker-0", "worker-1"):
        register(etcd, w)
    assert reconcile_once(etcd, front=0)
    gone = register(etcd, "worker-2")
    snap = parse(etcd.get_prefix(prefix(CFG)), CFG)
    _, (rec, changes) = plan(snap, True, 40, CFG.workers)
    assert [(c.kind, c.worker, c.start) for c in changes] == [("join", "worker-2", 40)]
    etcd.revoke(gone)                       # it left (or its lease ran out) after the read
    assert not etcd.cas(record_key(CFG), snap.revision, encode(rec),
                        also_compare=joined_still_registered(CFG, snap, changes))
    assert sorted(record(etcd).members) == ["worker-0", "worker-1"]
