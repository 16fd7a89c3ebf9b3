"""nodes-back on a training job: a killed role must be started again, a paused one resumed."""
from __future__ import annotations

from pschaos.harness.checkers.evidence import nodes_back

CTX = {"job": {"steps": 10}, "workers": []}


def h(*events):
    return [{"t": 0.0, "node": "harness", "type": "info", "f": "run-start", "value": {}}, *events]


def fault(t, f, kind, target, **extra):
    return {"t": t, "node": "harness", "type": "info", "f": f, "value": {"kind": kind, "target": target, **extra}}


def launch(t, process):
    return {"t": t, "node": process, "type": "info", "f": "job-launch", "value": {"process": process}}


def test_a_killed_task_the_scheduler_started_again_is_back():
    v = nodes_back(h(launch(0.1, "worker-0"), fault(5, "fault-start", "kill", "worker-0"),
                     fault(5.1, "fault-stop", "kill", "worker-0"), launch(5.2, "worker-0")), CTX)
    assert v.valid is True and v.details["faulted"] == ["worker-0"]


def test_a_killed_task_never_started_again_fails():
    v = nodes_back(h(launch(0.1, "worker-0"), fault(5, "fault-start", "kill", "worker-0"),
                     fault(5.1, "fault-stop", "kill", "worker-0")), CTX)
    assert v.valid is False and v.details["dead_at_end"][0]["node"] == "worker-0"


def test_a_rank_is_back_by_its_shims_start():
    start = {"t": 7, "node": "rank-1", "type": "info", "f": "job-start", "value": {"worker": "rank-1"}}
    assert nodes_back(h(fault(5, "fault-start", "kill", "rank-1"), start), CTX).valid is True


def test_a_pause_never_healed_fails_and_a_healed_one_passes():
    assert nodes_back(h(fault(5, "fault-start", "pause", "ps-0")), CTX).valid is False
    assert nodes_back(h(fault(5, "fault-start", "pause", "ps-0"), fault(9, "fault-stop", "pause", "ps-0")), CTX).valid


def test_a_heal_that_failed_is_no_heal():
    stop = fault(9, "fault-stop", "pause", "ps-0", heal_error="ProcessLookupError")
    assert nodes_back(h(fault(5, "fault-start", "pause", "ps-0"), stop), CTX).valid is False


def test_a_cut_of_a_job_that_dropped_no_packet_makes_the_run_unknown():
    from pschaos.harness.checkers.evidence import scenario_ran
    start = fault(5, "fault-start", "loss", "workers<->ps-0", index=0)
    stop = fault(9, "fault-stop", "loss", "workers<->ps-0", index=0, packets_dropped=0)
    assert scenario_ran(h(start, stop), CTX).valid == "unknown"
    stop["value"]["packets_dropped"] = 12
    assert scenario_ran(h(start, stop), CTX).valid is True


def test_a_task_started_again_that_then_failed_is_not_back():
    died = {"t": 6, "node": "ps-0", "type": "info", "f": "job-exit", "value": {"process": "ps-0", "exit_code": 1}}
    v = nodes_back(h(fault(5, "fault-start", "kill", "ps-0"), launch(5.2, "ps-0"), died), CTX)
    assert v.valid is False and "then failed" in v.details["dead_at_end"][0]["why"]
