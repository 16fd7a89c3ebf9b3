"""pschaos.psnodes.membership.members against an etcd model (harness/backends/sim/etcd.py: etcd's revisions, transactions and
leases): a leaving worker is never admitted again by a reconcile that runs in between, and a
reconcile admits only registrations that still exist."""
import pytest
import simpy

from pschaos.harness.backends.sim.etcd import SimEtcd
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.core import membership
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.membership.members import (WorkerMembership, encode, joined_still_registered, live_key, parse, plan, prefix,
                             record_key)
from pschaos.psnodes.runtime import Runtime

CFG = ClusterConfig(cluster_id="m", etcd="sim://etcd", workers=2)


def reconcile_once(etcd: SimEtcd, front: int) -> bool:
    """One primary's poll, as psnodes/membership/member_watch.py makes it."""
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


# ---- review findings (members-review.md); each failed on the code before the fix ----------------
from pschaos.psnodes.etcd import EtcdError  # noqa: E402


class Clock:
    """A monotonic clock that moves only when slept on; `hook` runs at every sleep."""

    def __init__(self) -> None:
        self.t, self.hook = 0.0, None

    def sleep(self, s: float) -> None:
        self.t += s
        if self.hook:
            self.hook(self.t)

    def runtime(self) -> Runtime:
        return Runtime(monotonic=lambda: self.t, sleep=self.sleep, time=lambda: self.t,
                       pool=lambda n, p: NoPool())


class NoPool:
    """The keepalive thread is driven by hand (keepalive_once) in these tests."""

    def submit(self, fn, *a):
        return None


class Cuttable(SimEtcd):
    """etcd a test can cut the worker off from; a primary reconciles after every registration."""
    cut = False

    def _enter(self, what):
        if self.cut:
            raise EtcdError(f"etcd unreachable ({what})")
        return super()._enter(what)

    def put(self, key, value, lease=0):
        out = super().put(key, value, lease)
        if "/live/" in key:
            reconcile_once(self, front=0)
        return out


class Log(EventLog):
    def __init__(self, name):
        super().__init__(None, name)
        self.seen = []

    def emit(self, f, value, type_="info", op_id=None):
        self.seen.append((f, value))

    def kinds(self):
        return [f for f, _ in self.seen]


def test_a_worker_cut_off_from_etcd_fences_itself_before_its_lease_can_expire_then_rejoins():
    """#1: it used to go on training (keepalive errors ignored) until etcd answered again."""
    cfg = ClusterConfig(cluster_id="m", etcd="sim://etcd", workers=2, member_ttl_s=2, member_margin_s=0.3)
    etcd, clock, log = Cuttable(simpy.Environment()), Clock(), Log("worker-0")
    m = WorkerMembership(cfg, "worker-0", etcd, clock.runtime(), log, 1)
    assert m.join() == 0 and m.valid()
    etcd.cut = True
    clock.sleep(0.6)
    m.keepalive_once()                          # unanswered: ignored before, now it only retries
    assert m.valid()
    clock.sleep(1.15)                           # 1.75 s since the grant: past ttl - margin
    assert not m.valid()
    assert m.hold() is False                    # fenced until etcd confirmed nothing for a TTL + slack
    assert log.kinds()[-2:] == ["member-fenced", "member-lost"] and m.lost and clock.t > 3.0
    etcd.cut = False
    assert m.join() == 0 and m.valid()         # registers again under a new lease


def test_a_fenced_worker_resumes_when_a_keepalive_gets_through_in_time():
    cfg = ClusterConfig(cluster_id="m", etcd="sim://etcd", workers=2, member_ttl_s=2, member_margin_s=0.3)
    etcd, clock, log = Cuttable(simpy.Environment()), Clock(), Log("worker-0")
    m = WorkerMembership(cfg, "worker-0", etcd, clock.runtime(), log, 1)
    m.join()
    etcd.cut = True
    clock.sleep(1.8)
    clock.hook = lambda t: (setattr(etcd, "cut", t < 2.0), m.keepalive_once())
    assert m.hold() is True and log.kinds()[-2:] == ["member-fenced", "member-unfenced"] and not m.lost


class FakeClient:
    """What Worker needs of PSClient before its first step."""
    incarnation, pushed_bytes, pulled_bytes, watch_reads = 1, 0, 0, 0

    def __init__(self, etcd):
        self.etcd = etcd

    def wait_ready(self):
        pass

    def init_dense(self, values):
        pass

    def close(self):
        pass


def test_a_worker_never_admitted_writes_a_fatal_train_error_and_ends_cleanly():
    """#10: NotAdmitted used to escape Worker.run (a traceback, no event)."""
    from pschaos.psnodes.worker import Worker

    cfg = ClusterConfig(cluster_id="m", etcd="sim://etcd", workers=1, member_join_timeout_s=0.5)
    etcd, clock, log = Cuttable(simpy.Environment()), Clock(), Log("worker-0")
    etcd.cut = True
    w = Worker(cfg, "worker-0", "mlp", "bsp", device="cpu", events=log, runtime=clock.runtime(),
               client=FakeClient(etcd))
    w.run(10)
    errors = [v for f, v in log.seen if f == "train-error"]
    assert len(errors) == 1 and errors[0]["fatal"] and "member_join_timeout_s=0.5" in errors[0]["error"]
    assert w.failed and "train-done" not in log.kinds() and clock.t < 1.0


def test_a_worker_stopped_while_joining_ends_at_once():
    """#10: SIGTERM (the stop flag) used to be ignored until the join timed out (30 s)."""
    from pschaos.psnodes.worker import Worker

    class NoPrimary(Cuttable):
        def put(self, key, value, lease=0):             # nobody reconciles: never admitted
            return SimEtcd.put(self, key, value, lease)

    cfg = ClusterConfig(cluster_id="m", etcd="sim://etcd", workers=1)
    etcd, clock, log = NoPrimary(simpy.Environment()), Clock(), Log("worker-0")
    w = Worker(cfg, "worker-0", "mlp", "bsp", device="cpu", events=log, runtime=clock.runtime(),
               client=FakeClient(etcd))
    clock.hook = lambda t: setattr(w, "stop", t > 0.3)
    w.run(10)
    assert clock.t < 1.0 and not w.failed and "train-error" not in log.kinds()
    assert [v["steps"] for f, v in log.seen if f == "train-done"] == [0]


def test_a_bsp_worker_on_a_cluster_without_a_barrier_is_refused_naming_the_field():
    """#11: nodes of a barrier: false cluster keep no membership."""
    from pschaos.psnodes.worker import Worker

    cfg = ClusterConfig(cluster_id="m", etcd="sim://etcd", workers=1, barrier=False)
    with pytest.raises(ValueError, match="barrier: true"):
        Worker(cfg, "worker-0", "mlp", "ssp", device="cpu", events=Log("worker-0"), runtime=Clock().runtime(),
               client=FakeClient(Cuttable(simpy.Environment())))


def test_join_grace_times_each_unregistered_config_worker_from_when_this_copy_first_saw_it():
    """#5: the shell's side of the grace (psnodes/membership/member_watch.py and the twin use it)."""
    from pschaos.psnodes.membership.members import JoinGrace, Snapshot

    g = JoinGrace(60.0)
    rec = membership.Record(1, {"worker-0": membership.Member(0, 7), "worker-1": membership.Member(0, 0)})
    snap = Snapshot(record=rec, revision=3, registered={"worker-0": 7})
    assert g.overdue(snap, 2, now=5.0) == set()
    assert g.overdue(snap, 2, now=64.9) == set() and g.overdue(snap, 2, now=65.0) == {"worker-1"}
    _, (new, changes) = plan(snap, True, 30, 2, g.overdue(snap, 2, now=65.0))
    assert sorted(new.members) == ["worker-0"] and [c.kind for c in changes] == ["expire"]
    late = Snapshot(record=rec, revision=3, registered={"worker-0": 7, "worker-1": 9})
    assert g.overdue(late, 2, now=70.0) == set() and g.since == {}       # registered: no longer timed
