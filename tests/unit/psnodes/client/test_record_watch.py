"""The deposed-primary watch's shared reads (psnodes/client/record_watch.py) and its decision
(psnodes/core/deposed.py): however many calls of one client wait on a shard, its record is read at
most once per period; failed reads back off; a record older than the call's route is no news."""
from __future__ import annotations

import threading

from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core.deposed import Watch, verdict
from pschaos.psnodes.etcd import EtcdError
from pschaos.psnodes.client.record_watch import BACKOFF_CAP_S, RecordWatch


class Reads:
    def __init__(self) -> None:
        self.t, self.n, self.fail = 0.0, 0, False
        self.record = ShardRecord(1, "a", ["a"])

    def __call__(self, shard: int):
        self.n += 1
        if self.fail:
            raise EtcdError("etcd unreachable")
        return self.record, None


def test_calls_within_a_period_share_one_read() -> None:
    r = Reads()
    w = RecordWatch(r, lambda: r.t)
    for _ in range(50):                       # fifty calls look at the same moment
        assert w.look(0, 0.05).record == r.record
    assert r.n == 1
    r.t = 0.049
    w.look(0, 0.05)
    assert r.n == 1
    r.t = 0.05
    w.look(0, 0.05)
    w.look(1, 0.05)                           # another shard has reads of its own
    assert r.n == 3


def test_a_slower_period_reads_less_but_sees_the_shared_reads() -> None:
    r = Reads()
    w = RecordWatch(r, lambda: r.t)
    w.look(0, 0.2)
    r.t = 0.1
    r.record = ShardRecord(2, "b", ["b"])
    assert w.look(0, 0.2).record.epoch == 1   # a barrier pull's cadence: no read yet
    assert w.look(0, 0.05).record.epoch == 2  # a push's read ...
    assert r.n == 2


def test_a_read_in_flight_is_not_repeated_by_other_calls() -> None:
    gate, inside = threading.Event(), threading.Event()
    n = [0]

    def slow(shard: int):
        n[0] += 1
        inside.set()
        gate.wait(5)
        return ShardRecord(1, "a", ["a"]), None
    w = RecordWatch(slow, lambda: 10.0)
    t = threading.Thread(target=w.look, args=(0, 0.05))
    t.start()
    inside.wait(5)
    assert w.look(0, 0.05) is None            # nothing read yet, and no second read begun
    gate.set()
    t.join(5)
    assert n[0] == 1 and w.look(0, 0.05).record.primary == "a"


def test_failed_reads_back_off_and_a_success_resets_it() -> None:
    r = Reads()
    r.fail = True
    w = RecordWatch(r, lambda: r.t)
    times = []
    while r.t < 3.0:
        before = r.n
        look = w.look(0, 0.05)
        if r.n > before:
            times.append(round(r.t, 2))
            assert look.failed
        r.t = round(r.t + 0.05, 2)
    gaps = [round(b - a, 2) for a, b in zip(times, times[1:])]
    assert gaps[:3] == [0.1, 0.2, 0.4] and max(gaps) == BACKOFF_CAP_S, gaps
    r.fail = False
    r.t += BACKOFF_CAP_S
    assert not w.look(0, 0.05).failed
    r.t += 0.05
    n = r.n
    w.look(0, 0.05)
    assert r.n == n + 1, "a successful read did not reset the backoff"


def test_the_verdicts() -> None:
    assert verdict("a", 3, "a", 3) is Watch.WAIT
    assert verdict("a", 3, "b", 4) is Watch.DEPOSED
    assert verdict("a", 3, "a", 4) is Watch.DEPOSED        # restored at a later epoch: re-route too
    assert verdict("a", 3, "b", 2) is Watch.WAIT           # a shared read older than the route: stale news
    assert verdict("a", 3, None, None, routed=False) is Watch.RETIRED
    assert verdict("a", 3, None, None, routed=True) is Watch.WAIT
    assert verdict("a", 3, None, None, routed=None) is Watch.WAIT


def test_the_run_metric_sums_each_workers_last_count_and_knows_when_it_has_none() -> None:
    from pschaos.harness.run.metrics import watch_reads
    h = [{"f": "train-step", "t": 1.0, "value": {"worker": "w0", "watch_reads": 3}},
         {"f": "train-step", "t": 2.0, "value": {"worker": "w1", "watch_reads": 1}},
         {"f": "train-done", "t": 3.0, "value": {"worker": "w0", "watch_reads": 5}}]
    assert watch_reads(h) == (6, 3.0)
    assert watch_reads([]) == (None, None)                 # an older history: no figure, not 0
    h.append({"f": "train-done", "t": 3.0, "value": {"worker": "w1", "watch_reads": None}})
    assert watch_reads(h) == (None, None)                  # a simulated worker counted nothing
