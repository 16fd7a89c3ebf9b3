"""A stalled run names who waits for whom (issue 32, item 7): the barrier's members, their
clocks and the ones holding it, beside each process's last step and the calls in flight."""
from __future__ import annotations

from pschaos.harness.checkers.progress import workload_progress

from tests.unit.histories import ev


def push_ok(t, worker, clock, shard=0):
    return ev(t, "push", {"worker": worker, "shard": shard, "clock": clock, "req_id": clock + 1}, "ok", worker)


def test_a_stall_at_a_bsp_barrier_names_its_members_clocks_and_the_one_holding_it():
    view = ev(0.1, "member-view", {"shard": 0, "generation": 2, "members": {"worker-0": 0, "worker-1": 0,
                                                                          "worker-2": 4}}, node="shard-0/0")
    h = [view, push_ok(1, "worker-0", 5), push_ok(1, "worker-1", 5), push_ok(1.1, "worker-2", 4),
         ev(1.2, "train-step", {"step": 5}, node="worker-0"),
         ev(1.3, "pull", {"worker": "worker-0", "shard": 0, "min_clock": 5}, "invoke", "worker-0", "worker-0:9"),
         ev(1.3, "pull", {"worker": "worker-1", "shard": 0, "min_clock": 5}, "invoke", "worker-1", "worker-1:9"),
         ev(95, "workload-stall", {"bound_s": 90, "quiet_s": 93.7, "step": 5}, node="harness")]
    v = workload_progress(h, {})
    assert v.valid is False
    b = v.details["barriers"]["0"]
    assert b["members"] == {"worker-0": 5, "worker-1": 5, "worker-2": 4} and b["floor"] == 4
    assert b["waits"] == {"worker-0": {"min_clock": 5, "held_by": ["worker-2"]},
                          "worker-1": {"min_clock": 5, "held_by": ["worker-2"]}} and b["generation"] == 2
    assert v.details["waiting"]["worker-0"]["in_flight"][0]["min_clock"] == 5


def test_a_stall_without_a_barrier_pull_names_no_barrier_and_a_missing_view_says_so():
    h = [ev(1.3, "pull", {"worker": "worker-0", "shard": 1, "min_clock": 3}, "invoke", "worker-0", "worker-0:9"),
         ev(95, "workload-stall", {"bound_s": 90, "quiet_s": 93.7, "step": 5}, node="harness")]
    v = workload_progress(h, {})
    assert v.valid is False and "member-view" in v.details["barriers"]["1"]["members"]
    quiet = [ev(95, "workload-stall", {"bound_s": 90, "quiet_s": 93.7, "step": 5}, node="harness")]
    assert "barriers" not in workload_progress(quiet, {}).details
