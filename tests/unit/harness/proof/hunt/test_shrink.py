"""The shrinker against a known oracle: it finds the one fault that matters, as short and early
as still fails, on the smallest cluster, within its budget, and never runs a candidate twice."""
from __future__ import annotations

from pschaos.harness.proof.hunt import FaultSpace, make_fault, shrink
from pschaos.harness.backends.cluster import ClusterSpec


def schedule():
    return [make_fault("kill", "replica(shard=1)", 3.0, 2.0, {}),
            make_fault("partition", "primary(shard=0)<->replicas(shard=0)", 6.0, 2.4, {}),
            make_fault("latency", "workers->shard(1)", 8.0, 1.0, {"latency_ms": 100})]


def test_only_the_partition_of_shard_0_matters_so_it_alone_remains_short_early_and_on_one_worker():
    seen = []

    def fails(faults, cluster):       # the "bug": a partition of shard 0 lasting >= 0.5 s, starting >= 2 s
        seen.append((tuple((f.kind, f.target, f.at.time, f.duration_s) for f in faults), cluster.model_dump_json()))
        return any(f.kind == "partition" and f.duration_s >= 0.5 and f.at.time >= 2.0 for f in faults)
    out = shrink(schedule(), ClusterSpec(shards=2, copies=3, workers=2), fails, budget=60, window_start=1.0)
    assert [(f.kind, f.target) for f in out.faults] == [("partition", "primary(shard=0)<->replicas(shard=0)")]
    f = out.faults[0]
    assert 0.5 <= f.duration_s < 1.0 and 2.0 <= f.at.time < 2.2
    assert out.cluster.workers == 1 and out.cluster.shards == 1      # no fault names shard 1 any more
    assert out.cluster.copies == 2                                    # a replica target keeps copies >= 2
    assert len(seen) == len(set(seen)) == out.runs and not out.exhausted


def test_the_budget_bounds_the_runs_and_says_it_ran_out():
    out = shrink(schedule(), ClusterSpec(), lambda fs, c: True, budget=3)
    assert out.runs == 3 and out.exhausted and len(out.faults) == 1


def test_a_schedule_that_stops_failing_is_kept_whole():
    out = shrink(schedule(), ClusterSpec(), lambda fs, c: False, budget=50)
    assert len(out.faults) == 3 and out.steps == []


def test_drawn_schedules_respect_the_window_and_never_take_every_copy_at_once():
    import random

    space = FaultSpace(shards=2, copies=3, workers=2, kinds=("kill", "pause", "stop", "partition"), start_s=2, stop_s=8,
                       max_faults=3)
    for i in range(300):
        fs = space.draw(random.Random(i))
        assert 1 <= len(fs) <= 3 and all(2 <= f.at.time <= 8 for f in fs)
        assert fs == sorted(fs, key=lambda f: f.at.time) and space.admits(fs)
        for f in fs:
            assert f.target in space.targets(f.kind)
    assert FaultSpace(shards=1, copies=3, workers=1).draw(random.Random(5)) == \
        FaultSpace(shards=1, copies=3, workers=1).draw(random.Random(5))


def test_bad_spaces_are_refused_by_field():
    import pytest

    with pytest.raises(ValueError, match="kinds"):
        FaultSpace(1, 3, 1, kinds=("scale-out",))
    with pytest.raises(ValueError, match="start_s"):
        FaultSpace(1, 3, 1, start_s=5, stop_s=5)


def test_a_shrunk_schedule_written_as_yaml_loads_back_as_the_same_scenario(tmp_path):
    from pschaos.harness.proof.hunt.hunt import hunt_scenario, to_yaml
    from pschaos.harness.run.scenario import load_scenario

    base = load_scenario("scenarios/kill-primary.yaml")
    sc = hunt_scenario(base, schedule(), ClusterSpec(shards=2, copies=3, workers=1), 10.0, name="hunt-kill-primary-7")
    assert "failover-budget" not in sc.expect.checks and sc.expect.metrics == []     # safety checks only
    f = tmp_path / "h.yaml"
    f.write_text(to_yaml(sc, 7, "pschaos hunt kill-primary --seed 7", "pschaos run h.yaml --seed 7"))
    back = load_scenario(f)
    assert back.faults == sc.faults and back.cluster == sc.cluster and back.expect.checks == sc.expect.checks
    assert back.workload == sc.workload and "# seed: 7" in f.read_text()


def test_kills_may_be_timed_to_moments_and_count_twice_on_their_shard():
    import random

    import pytest
    space = FaultSpace(shards=1, copies=3, workers=2, kinds=("kill",), start_s=2, stop_s=8, max_faults=3)
    drawn = [f for i in range(60) for f in space.draw(random.Random(i))]
    moments = {f.params.get("during", "") for f in drawn}
    assert moments == {"", "checkpoint", "catch-up", "promotion"}
    assert all(f.target.startswith("replica(") for f in drawn if f.params.get("during") == "catch-up")
    assert any(f.target == "worker(any)" for f in drawn)
    # a promotion kill takes two of three copies: nothing else on the shard may overlap it
    promo = make_fault("kill", "primary(shard=0)", 3.0, 1.0, {"during": "promotion"})
    assert space.admits([promo]) and not space.admits([promo, make_fault("kill", "replica(shard=0)", 3.5, 1.0, {})])
    assert FaultSpace(shards=1, copies=3, workers=2, kinds=("kill",), moments=()).draw(random.Random(1))
    with pytest.raises(ValueError, match="are not moments"):
        FaultSpace(1, 3, 1, moments=("soon",))
