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
    assert sc.expect.checks == list(JOB_CHECKS)
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
