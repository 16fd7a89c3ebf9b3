"""Every check that applies runs; a scenario adds checks, or excludes one only with a reason
(issue 32, item 1). On the old code a scenario's `expect.checks` was the whole list: a check left
out of it (monotone-reads in the one-way cut) silently never ran."""
from __future__ import annotations

import pytest

from pschaos.harness.checkers.applicable import PSNODES_CHECKS, psnodes
from pschaos.harness.errors import ScenarioError
from pschaos.harness.run.scenario import CHECKS, Scenario, load_scenario

ONE_WAY = {"name": "cut", "faults": [{"at": {"step": 10}, "kind": "partition", "duration_s": 4.0,
                                      "target": "primary(shard=0) -> replicas(shard=0)"}]}


def sc(**doc) -> Scenario:
    return Scenario.model_validate({"name": "s", **doc})


def test_a_check_left_out_of_the_list_still_runs_and_the_report_says_what_did_not():
    s = sc(**ONE_WAY, expect={"checks": ["no-lost-acks"]})
    sel = s.selection()
    assert "monotone-reads" in sel.checks and "stops-acking" in sel.checks and "delta-complete" in sel.checks
    assert set(sel.checks) | set(sel.not_applicable) | set(sel.excluded) == set(PSNODES_CHECKS)
    assert "barrier-live" in sel.not_applicable and "async" in sel.not_applicable["barrier-live"]


def test_an_exclusion_needs_a_reason_a_check_that_would_run_and_is_reported():
    s = sc(**ONE_WAY, expect={"exclude": {"converged": "the model is too small to reach its target here"}})
    assert "converged" not in s.selection().checks
    assert s.selection().excluded == {"converged": "the model is too small to reach its target here"}
    for expect, says in ((({"exclude": {"converged": ""}}), "reason"),
                         ({"exclude": {"barrier-live": "no barrier in this run at all"}}, "does not run here anyway"),
                         ({"exclude": {"nope": "a reason long enough"}}, "unknown check"),
                         ({"checks": ["converged"], "exclude": {"converged": "a reason long enough"}}, "not both")):
        with pytest.raises(ValueError, match=says):
            sc(**ONE_WAY, expect=expect)


def test_findings_must_be_among_the_checks_that_run():
    with pytest.raises(ValueError, match="do not run here"):
        sc(expect={"finds": ["stops-acking"]})          # no cut primary: stops-acking does not apply
    assert "stops-acking" in sc(expect={"checks": ["stops-acking"], "finds": ["stops-acking"]}).selection().checks


@pytest.mark.parametrize("doc, check, applies", [
    ({"cluster": {"training": "bsp"}, "faults": [{"at": {"step": 5}, "kind": "kill", "target": "worker-1"}]},
     "barrier-live", True),
    ({"cluster": {"training": "bsp"}, "faults": [{"at": {"step": 5}, "kind": "kill", "target": "primary(shard=0)"}]},
     "barrier-live", False),
    ({"cluster": {"training": "ssp"}, "faults": [{"at": {"step": 5}, "kind": "partition", "duration_s": 3,
                                                  "target": "worker-1 -> etcd"}]}, "barrier-live", True),
    ({"faults": [{"at": {"step": 5}, "kind": "kill", "target": "replica(shard=0)"}]}, "catch-up-by-delta", True),
    ({"faults": [{"at": {"step": 5}, "kind": "kill", "target": "primary(shard=0)"}]}, "catch-up-by-delta", False),
    ({"faults": [{"at": {"step": 5}, "kind": "kill", "target": "replica(shard=0)", "params": {"wipe": True}}]},
     "catch-up-by-delta", False),
    ({"faults": [{"at": {"step": 5}, "kind": "pause", "target": "replica(shard=0)", "duration_s": 2}]},
     "catch-up-by-delta", False),
    (ONE_WAY, "stops-acking", True),
    ({**ONE_WAY, "cluster": {"replication": "async"}}, "stops-acking", False),
    ({"faults": [*ONE_WAY["faults"], {"at": {"step": 5}, "kind": "partition", "duration_s": 3,
                                      "target": "primary(shard=0) -> etcd"}]}, "stops-acking", False),
    ({"faults": [{"at": {"step": 5}, "kind": "partition", "duration_s": 0.5,
                  "target": "primary(shard=0) -> replicas(shard=0)"}]}, "stops-acking", False),
    ({"faults": [{"at": {"step": 5}, "kind": "scale-out-shards", "params": {"count": 1}}]}, "single-owner", True),
    ({"faults": [{"at": {"step": 5}, "kind": "scale-out-shards", "params": {"count": 1}}]}, "losses-accounted", False),
    ({"cluster": {"replication": "async"}}, "losses-accounted", False),
    ({}, "losses-accounted", True),
    ({"cluster": {"workers": 0}}, "exactly-once", False),
    ({}, "failover-budget", False),
    ({"faults": [{"at": {"step": 5}, "kind": "power-loss", "target": "primary(shard=0)"}]}, "best-promoted", True),
    ({"faults": [{"at": {"step": 5}, "kind": "power-loss", "target": "primary(shard=0)",
                  "params": {"copies": "all"}}]}, "best-promoted", False),       # no candidate: a restore
    ({}, "converge-baseline", False),
])
def test_applicability_follows_the_schedule_as_written(doc, check, applies):
    s = sc(**doc)
    assert (check in s.selection().checks) is applies, s.selection().not_applicable.get(check)


def test_a_nemesis_counts_its_kinds_and_targets():
    # a nemesis may draw none of its kinds at a seed: the checks that need a fault to fire do not apply
    rules = psnodes({"training": "bsp"}, [], {"kinds": ["kill"], "targets": {"kill": "worker(any)"}})
    assert rules["barrier-live"] is not None and rules["catch-up-by-delta"] is not None
    assert "nemesis" in psnodes({}, [], {"kinds": ["pause"]}, default_target=lambda k: "primary(shard=any)")[
        "best-promoted"]
    assert psnodes({}, [], {"kinds": ["partition"]})["stops-acking"] is not None     # drawn at run time: add it


def test_adapted_systems_and_jobs_run_their_defaults_and_add_the_rest():
    redis = {"system": "redis-sentinel", "cluster": {"shards": 1, "copies": 3, "workers": 2}}
    sel = sc(**redis).selection()
    assert sel.checks == ["no-lost-updates", "counters-match"] and "linearizable-reads" in sel.not_applicable
    assert "linearizable-reads" in sc(**redis, expect={"checks": ["linearizable-reads"]}).selection().checks


def test_a_run_made_for_another_purpose_excludes_every_other_default_with_its_reason():
    s = sc(**ONE_WAY)
    e = s.expect_only(["converged"], "a fault-free run made for converge-baseline")
    again = s.model_copy(update={"expect": e})
    assert again.selection().checks == ["converged"]
    assert set(again.selection().excluded) == set(s.selection().checks) - {"converged"}


def test_every_library_scenario_runs_what_applies_and_every_check_is_known():
    import glob

    for path in sorted(glob.glob("scenarios/*.yaml")):
        sel = load_scenario(path).selection()
        assert set(sel.checks) <= set(CHECKS) and sel.checks, path
        assert all(len(why) >= 8 for why in sel.excluded.values()), path


def test_the_reason_is_named_in_the_loader_error(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("name: x\nexpect:\n  exclude:\n    converged: ok\n")
    with pytest.raises(ScenarioError, match=r"x.yaml:4: expect.exclude: converged: give the reason"):
        load_scenario(p)


def test_a_random_schedule_is_judged_by_what_its_seed_drew():
    """Review of issue 32, finding 7: a nemesis scenario never judged best-promoted,
    checkpoint-loads or catch-up-by-delta, since a nemesis may draw none at a seed. A run's seed
    fixes its draws before it starts; what they surely bring is judged at that seed, and the
    scenario as written (no seed) still says what depends on the draw."""
    from pschaos.harness.run.nemesis import schedule

    s = sc(nemesis={"kinds": ["kill", "pause"], "interval_s": 1.0, "duration_s": 0.5, "start_s": 1.0, "stop_s": 9.0,
                    "targets": {"kill": "replica(shard=any)", "pause": "primary(shard=any)"}})
    written = s.selection()
    for check in ("best-promoted", "checkpoint-loads", "catch-up-by-delta"):
        assert check not in written.checks and "a nemesis may draw none" in written.not_applicable[check]
    drawn = schedule(s.nemesis, 1)
    kinds = {f.kind for f in drawn}
    assert kinds == {"kill", "pause"}, "this seed draws both kinds (the test's premise)"
    assert {"best-promoted", "checkpoint-loads", "catch-up-by-delta"} <= set(s.selection(drawn).checks)
    # a seed whose draws take no primary away leaves best-promoted out, with the reason
    only_kills = [f for f in drawn if f.kind == "kill"]
    sel = s.selection(only_kills)
    assert "catch-up-by-delta" in sel.checks and "best-promoted" in sel.not_applicable


def test_a_kill_timed_to_a_promotion_brings_no_certain_catch_up():
    """It takes the primary and its successor, whatever replica(...) it names (hostile review of
    the seeded selection: nemesis-soak at seed 1 draws only such kills)."""
    timed = {"faults": [{"at": {"step": 5}, "kind": "kill", "target": "replica(shard=0)",
                         "params": {"during": "promotion"}}]}
    assert "catch-up-by-delta" in sc(**timed).selection().not_applicable


def test_a_nemesis_scenario_may_exclude_or_expect_what_only_some_seeds_draw():
    """The second review: exclusions and findings were judged against the seed-less selection, so
    a check only a draw brings could be neither excluded with a reason nor expected to fail."""
    nem = {"kinds": ["kill", "pause"], "interval_s": 1.0, "duration_s": 0.5, "start_s": 1.0, "stop_s": 9.0,
           "targets": {"kill": "replica(shard=any)", "pause": "primary(shard=any)"}}
    s = sc(nemesis=nem, expect={"exclude": {"best-promoted": "a reason long enough to print"},
                                "may_find": ["catch-up-by-delta"]})
    from pschaos.harness.run.nemesis import schedule

    assert "best-promoted" not in s.selection(schedule(s.nemesis, 1)).checks
    assert s.selection().excluded == {"best-promoted": "a reason long enough to print"}
    with pytest.raises(ValueError, match="does not run here anyway"):
        sc(nemesis={**nem, "kinds": ["kill"]}, expect={"exclude": {"best-promoted": "a reason long enough"}})
