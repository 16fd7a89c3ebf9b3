"""A workload that stops stepping ends its run with a failing `progress` check, in virtual time:
never a test's timeout. An open fault's silence is the fault's, not a stall."""
from __future__ import annotations

from pschaos.harness.checkers.progress import who_waits, workload_progress
from pschaos.harness.run.scenario import Scenario
from pschaos.harness.run.stall import StallWatch

from tests.unit.harness.run.test_runner_schedule import run, valid
from tests.unit.helpers import only


def scenario(faults: list[dict], stall_s: float, steps: int = 100) -> Scenario:
    return only(Scenario.model_validate({
        "name": "fake-stall", "cluster": {"shards": 1, "copies": 3, "workers": 1},
        "workload": {"steps": steps, "stall_s": stall_s}, "faults": faults,
        "expect": {"checks": ["single-primary"]}}))


def test_a_workload_that_never_steps_is_stopped_and_fails_progress(tmp_path):
    rep, be, hist = run(tmp_path, scenario([], stall_s=5.0), step_s=1000.0)
    stalls = [e for e in hist if e["f"] == "workload-stall"]
    assert len(stalls) == 1 and 5.0 < stalls[0]["value"]["quiet_s"] <= 6.0
    assert stalls[0]["t"] - hist[0]["t"] < 10          # stopped at the bound, not at the run's time limit
    assert valid(rep)["progress"] is False and rep["verdict"] == "fail"
    assert be.torn_down


def test_a_long_open_fault_is_not_a_stall_and_the_watch_is_the_evidence(tmp_path):
    sc = scenario([{"at": {"step": 10}, "kind": "pause", "target": "worker-0", "duration_s": 20.0}], stall_s=5.0)
    rep, be, hist = run(tmp_path, sc)
    assert not [e for e in hist if e["f"] == "workload-stall"]
    p = rep["checks"]["progress"]
    assert p["valid"] is True and p["details"]["steps_seen"] >= 100 and p["details"]["bound_s"] == 5.0
    assert p["details"]["longest_quiet_s"] < 5.0


def test_no_watch_on_record_is_unknown_and_a_stall_names_who_waits_for_what():
    assert workload_progress([], {}).valid == "unknown"
    h = [{"t": 1.0, "node": "worker-0", "type": "ok", "f": "train-step", "value": {"step": 7}},
         {"t": 1.1, "node": "worker-0", "type": "invoke", "f": "pull", "op_id": "p1",
          "value": {"shard": 0, "min_clock": 8}},
         {"t": 1.2, "node": "worker-1", "type": "ok", "f": "train-step", "value": {"step": 3}},
         {"t": 1.3, "node": "worker-1", "type": "invoke", "f": "pull", "op_id": "p2", "value": {"shard": 0}},
         {"t": 1.4, "node": "worker-1", "type": "ok", "f": "pull", "op_id": "p2", "value": {}},
         {"t": 9.0, "node": "harness", "type": "info", "f": "workload-stall", "value": {"bound_s": 5.0, "quiet_s": 7.8}}]
    v = workload_progress(h, {})
    assert v.valid is False and v.details["quiet_s"] == 7.8
    assert v.details["waiting"]["worker-0"] == {"step": 7, "step_t": 1.0,
                                               "in_flight": [{"f": "pull", "since_s": 7.9, "shard": 0, "min_clock": 8}]}
    assert v.details["waiting"]["worker-1"]["in_flight"] == [] and who_waits(h, 1.15)["worker-0"]["step"] == 7


def test_the_watch_counts_acknowledged_steps_only_and_reads_on(tmp_path):
    f = tmp_path / "worker-0.jsonl"
    f.write_text('{"f": "train-step", "type": "ok", "value": {"step": 1}}\n'
                 '{"f": "step", "value": {"step": 2}, "type": "invoke"}\n{"f": "push", "type": "ok"}\n')
    w = StallWatch(lambda: [f], 2.5, 0.0, period_s=0.5)
    assert w.tick(0.0, False) is None and w.steps == 1
    with open(f, "a") as g:
        g.write('{"f": "step", "value": {"step": 2}, "type": "ok"}\n{"f": "train-st')      # torn: later
    assert w.tick(0.6, False) is None and w.steps == 2
    assert w.tick(1.2, False) is None and w.tick(2.9, False) is None      # quiet 2.3 s, from 0.6
    assert w.tick(2.95, False) is None                                    # not due yet
    assert w.tick(3.5, True) is None and w.tick(5.6, False) is None and round(w.tick(6.1, False), 6) == 2.6   # held until 3.5
    assert w.summary()["longest_quiet_s"] == 2.6


def test_one_worker_stuck_while_the_others_step_is_a_stall_that_names_it(tmp_path):
    """The whole-workload watch saw steps from worker-1 and never fired while worker-0 stood still
    (it did only once every other worker finished); the per-worker watch names worker-0 at the
    bound. A worker that finished, or is not running, is not stuck; an open fault holds them all."""
    f0, f1 = tmp_path / "worker-0.jsonl", tmp_path / "worker-1.jsonl"

    def step(f, node, n):
        with open(f, "a") as g:
            g.write(f'{{"t": 0, "node": "{node}", "type": "info", "f": "train-step", "value": {{"step": {n}}}}}\n')

    running = {"worker-0", "worker-1"}
    w = StallWatch(lambda: [f0, f1], 2.0, 0.0, period_s=0.5, alive=lambda n: n in running)
    step(f0, "worker-0", 1)
    step(f1, "worker-1", 1)
    assert w.tick(0.0, False) is None
    for i, t in enumerate((0.5, 1.0, 1.5, 2.0)):
        step(f1, "worker-1", i + 2)
        assert w.tick(t, False) is None
    step(f1, "worker-1", 9)
    assert w.tick(2.5, False) == 2.5 and w.stuck == ["worker-0"]
    running.discard("worker-0")                               # killed and not started again: not stuck
    step(f1, "worker-1", 10)
    assert w.tick(3.0, False) is None and w.stuck == []
    running.add("worker-0")
    w.tick(3.5, True)                                         # a fault open: every worker's quiet starts again
    step(f1, "worker-1", 11)
    assert w.tick(4.0, False) is None
    with open(f0, "a") as g:
        g.write('{"t": 0, "node": "worker-0", "type": "info", "f": "train-done", "value": {}}\n')
    for t in (4.5, 5.0, 5.5, 6.0):
        step(f1, "worker-1", int(t * 10))
        assert w.tick(t, False) is None                       # done: no longer watched


def test_a_fault_never_healed_holds_the_watch_only_for_the_bound_and_a_restarted_worker_is_watched_again(tmp_path):
    """A kill with no duration stays open to the end: it held the watch for the whole run, so a
    workload that never stepped again after it ran into pytest's timeout. Now it holds for the
    bound after it started. A worker that said train-done (SIGTERM) and steps again is watched."""
    from types import SimpleNamespace

    from pschaos.harness.run.stall import holding

    kill = SimpleNamespace(heal_at_t=None, heal_at_step=None, start_t=100.0)
    pause = SimpleNamespace(heal_at_t=500.0, heal_at_step=None, start_t=100.0)
    assert holding([kill], 150.0, 90.0) and not holding([kill], 191.0, 90.0)
    assert holding([pause], 400.0, 90.0) and not holding([], 150.0, 90.0)
    f = tmp_path / "worker-0.jsonl"
    w = StallWatch(lambda: [f], 2.0, 0.0, period_s=0.5)
    f.write_text('{"t": 0, "node": "worker-0", "type": "info", "f": "train-step", "value": {"step": 1}}\n'
                 '{"t": 0, "node": "worker-0", "type": "info", "f": "train-done", "value": {}}\n')
    assert w.tick(0.0, False) is None and "worker-0" in w.done
    with open(f, "a") as g:
        g.write('{"t": 0, "node": "worker-0", "type": "info", "f": "train-step", "value": {"step": 1}}\n')
    assert w.tick(0.5, False) is None and "worker-0" not in w.done


def test_a_workload_that_hangs_under_a_fault_healed_at_a_step_is_a_stall_not_a_wait_to_the_limit(tmp_path):
    """A fault healed at step N heals only if the workload gets there: it held the watch until
    then, so a workload that hung under it ran to the run's time limit (pytest's timeout in CI)
    and `progress` passed on the steps it had seen (review of issue 32, finding 1)."""
    sc = scenario([{"at": {"step": 10}, "kind": "pause", "target": "worker-0", "until": {"step": 50}}], stall_s=5.0)
    rep, be, hist = run(tmp_path, sc)
    stalls = [e for e in hist if e["f"] == "workload-stall"]
    assert len(stalls) == 1 and stalls[0]["value"]["stuck"] == ["worker-0"], stalls
    assert stalls[0]["t"] - hist[0]["t"] < 20           # the bound after the fault began, not the 170 s limit
    assert not [e for e in hist if e["f"] == "workload-timeout"]
    assert valid(rep)["progress"] is False and rep["verdict"] == "fail"


def test_a_workload_still_running_at_its_time_limit_is_not_shown_to_progress():
    h = [{"t": 1.0, "node": "worker-0", "type": "ok", "f": "train-step", "value": {"step": 7}},
         {"t": 170.0, "node": "harness", "type": "info", "f": "workload-timeout",
          "value": {"limit_s": 170.0, "step": 7, "running": ["worker-0"]}},
         {"t": 170.1, "node": "harness", "type": "info", "f": "progress-watch",
          "value": {"bound_s": 90.0, "polls": 300, "steps_seen": 7, "longest_quiet_s": 80.0}}]
    v = workload_progress(h, {})
    assert v.valid == "unknown" and "time limit" in v.details["reason"] and "worker-0" in v.details["waiting"]


def test_a_worker_an_open_fault_holds_is_the_faults_not_stuck_and_a_restarted_one_is_watched_from_its_return(tmp_path):
    """Held only for the bound, a step-healed pause of worker-1 made worker-1 look stuck once
    worker-0 took longer than that to reach the heal step (review of this session's change)."""
    sc = only(Scenario.model_validate({
        "name": "fake-stall", "cluster": {"shards": 1, "copies": 3, "workers": 2},
        "workload": {"steps": 300, "stall_s": 5.0},
        "faults": [{"at": {"step": 10}, "kind": "pause", "target": "worker-1", "until": {"step": 200}}],
        "expect": {"checks": ["single-primary"]}}))
    rep, be, hist = run(tmp_path, sc)                     # worker-0 reaches step 200 some 19 s later
    assert not [e for e in hist if e["f"] == "workload-stall"], [e for e in hist if e["f"] == "workload-stall"]
    assert valid(rep)["progress"] is True
    up = {"worker-0": True, "worker-1": True}
    f = tmp_path / "w.jsonl"

    def step(worker: str) -> None:
        with open(f, "a") as g:
            g.write('{"t": 0, "node": "%s", "type": "info", "f": "train-step", "value": {"step": 1}}\n' % worker)
    step("worker-0")
    w = StallWatch(lambda: [f], 2.0, 0.0, period_s=0.5, alive=lambda n: up[n])
    assert w.tick(0.0, False) is None
    up["worker-0"] = False                                # killed, no fault open any more: not watched
    for t in (1.0, 2.5, 4.0):
        step("worker-1")                                  # the other worker steps on
        assert w.tick(t, False) is None
    up["worker-0"] = True                                 # restarted at 5.0: its clock starts there
    for t in (5.0, 6.5):
        step("worker-1")
        assert w.tick(t, False) is None
    assert w.last["worker-0"] == 5.0
    step("worker-1")
    assert w.tick(7.5, False) == 2.5 and w.stuck == ["worker-0"]
