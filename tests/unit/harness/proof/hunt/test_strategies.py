"""The Hypothesis strategies draw what the hunt's space allows, and Hypothesis shrinks with them."""
from __future__ import annotations

from hypothesis import find, given, settings

from pschaos.harness.proof.hunt import SAFETY
from pschaos.harness.proof.hunt import FaultSpace
from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.proof.hunt.strategies import scenarios, schedules

SPACE = FaultSpace(shards=2, copies=3, workers=2, kinds=("kill", "pause", "partition", "loss"), start_s=2, stop_s=9)


@settings(max_examples=150, deadline=None)
@given(schedules(SPACE))
def test_every_drawn_schedule_is_valid_in_its_window_and_admitted(fs):
    assert 1 <= len(fs) <= SPACE.max_faults and SPACE.admits(fs)
    assert all(2 <= f.at.time <= 9 and f.target in SPACE.targets(f.kind) for f in fs)
    assert [f.at.time for f in fs] == sorted(f.at.time for f in fs)


def test_hypothesis_shrinks_a_failing_schedule_to_the_one_fault_that_matters():
    bad = find(schedules(SPACE), lambda fs: any(f.kind == "partition" and f.at.time >= 5 for f in fs))
    assert len(bad) == 1 and bad[0].kind == "partition" and bad[0].at.time == 5.0


@settings(max_examples=20, deadline=None)
@given(scenarios(load_scenario("scenarios/kill-primary.yaml"), SPACE, 10.0))
def test_drawn_scenarios_keep_the_cluster_and_only_safety_checks(sc):
    assert sc.cluster.shards == 2 and sc.workload.duration_s == 10.0 and sc.expect.metrics == []
    assert "no-lost-acks" in sc.selection().checks and sc.faults
    assert set(sc.selection().checks) <= set(SAFETY), "a hunt judges safety only"
    assert all("safety only" in why for why in sc.expect.exclude.values())
