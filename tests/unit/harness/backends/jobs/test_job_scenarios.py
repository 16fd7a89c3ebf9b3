"""A training job's scenario is checked when it loads: what it cannot take is refused by name."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from pschaos.harness.backends.jobs.api import JOB_CHECKS
from pschaos.harness.backends.systems import SYSTEMS, system_named
from pschaos.harness.errors import HarnessError
from pschaos.harness.run.scenario import Scenario

BASE = {"name": "j", "system": "torchrun-ddp", "workload": {"steps": 50}}


def load(**over):
    return Scenario.model_validate({**BASE, **over})


def error(**over) -> str:
    with pytest.raises(ValidationError) as e:
        load(**over)
    return str(e.value)


def test_a_job_scenario_gets_the_job_checks_and_defaults():
    sc = load(faults=[{"at": {"step": 10}, "kind": "kill", "target": "rank-1"}])
    assert sc.selection().checks == list(JOB_CHECKS)
    assert sc.system_options["nproc"] == 3 and sc.system_options["shared_store"] is False
    assert "torchrun-ddp" in SYSTEMS


def test_a_psnodes_check_is_refused_for_a_job():
    assert "need psnodes' internals" in error(expect={"checks": ["replicas-match"]})


def test_a_role_the_job_does_not_have_is_refused():
    msg = error(faults=[{"at": {"step": 10}, "kind": "kill", "target": "rank-7"}])
    assert "'rank-7' is not a role of torchrun-ddp" in msg and "rank-2" in msg


def test_a_fault_kind_the_job_cannot_take_is_refused():
    msg = error(faults=[{"at": {"step": 10}, "kind": "cpu-throttle", "target": "rank-1", "params": {"cpus": 0.5}}])
    assert "takes the fault kinds kill, stop, pause" in msg


def test_psnodes_settings_are_refused():
    assert "are psnodes' settings" in error(cluster={"shards": 2})


def test_unknown_options_are_named_with_a_hint():
    assert "did you mean nproc" in error(system_options={"nprocs": 2})


def test_the_job_runs_on_processes_only():
    with pytest.raises(HarnessError, match="local processes only"):
        system_named("torchrun-ddp").backend_factory("docker")


def test_a_kill_may_be_timed_to_a_checkpoint_write_but_not_to_psnodes_moments():
    sc = load(faults=[{"at": {"step": 10}, "kind": "kill", "target": "rank-0", "params": {"during": "checkpoint"}}])
    assert sc.faults[0].params["during"] == "checkpoint"
    assert "promotion" in error(faults=[{"at": {"step": 10}, "kind": "kill", "target": "rank-0",
                                         "params": {"during": "promotion"}}])
    msg = error(faults=[{"at": {"step": 10}, "kind": "kill", "target": "rank-0", "params": {"during": "migration"}}])
    assert "during: checkpoint" in msg


def test_a_loss_on_a_rank_is_taken_and_a_toxic_is_refused_by_name():
    sc = load(faults=[{"at": {"step": 10}, "kind": "loss", "target": "nodes <-> rank-1", "params": {"percent": 10},
                       "duration_s": 2}])
    assert sc.faults[0].kind == "loss"
    assert "takes the fault kinds" in error(faults=[{"at": {"step": 10}, "kind": "latency", "target": "nodes -> rank-1",
                                                     "params": {"latency_ms": 20}, "duration_s": 2}])


def test_a_kill_during_checkpoint_is_refused_on_a_role_that_writes_none():
    msg = error(faults=[{"at": {"step": 10}, "kind": "kill", "target": "rank-1", "params": {"during": "checkpoint"}}])
    assert "faults[0].target" in msg and "writes no checkpoint" in msg and "rank-0" in msg


def _ran(*events):
    from pschaos.harness.checkers.evidence import scenario_ran

    ctx = {"job": {"steps": 10}, "scheduled_faults": 1}
    events = ((0.0, "run-start", {"scenario": "j"}),) + events
    return scenario_ran([{"t": t, "f": f, "type": "info", "value": v} for t, f, v in events], ctx)


def test_a_kill_timed_to_a_write_that_had_committed_is_unknown_not_a_kill_mid_write():
    start = {"index": 0, "kind": "kill", "target": "rank-0", "params": {"during": "checkpoint"},
             "caught_writing": "checkpoint of step 40 (0.0, pid 9)"}
    stop = {"index": 0, "kind": "kill", "target": "rank-0", "why": "scheduled"}
    committed = _ran((1.0, "fault-start", start), (1.1, "fault-stop", stop), (3.0, "job-resume", {"step": 40}))
    assert committed.valid == "unknown" and "committed before the kill" in str(committed.details)
    torn = _ran((1.0, "fault-start", start), (1.1, "fault-stop", stop), (3.0, "job-resume", {"step": 20}))
    assert torn.valid is True, torn.details


def test_a_cut_whose_role_restarted_meanwhile_is_unknown():
    start = {"index": 0, "kind": "loss", "target": "nodes<->rank-1", "params": {"percent": 10}}
    stop = {"index": 0, "kind": "loss", "target": "nodes<->rank-1", "why": "scheduled", "packets_dropped": 40,
            "evidence": {"before": {"pid": 10}, "after": {"pid": 11}}}
    v = _ran((1.0, "fault-start", start), (9.0, "fault-stop", stop))
    assert v.valid == "unknown" and "pid 10 -> 11" in str(v.details)
    stop["evidence"]["after"]["pid"] = 10
    assert _ran((1.0, "fault-start", start), (9.0, "fault-stop", stop)).valid is True
