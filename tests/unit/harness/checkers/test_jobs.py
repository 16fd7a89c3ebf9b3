"""The training-job checks on histories written by hand: each one can fail, and fails closed."""
from __future__ import annotations

from pschaos.harness.checkers.goodput import job_goodput
from pschaos.harness.checkers.jobs import (job_exactly_once, job_no_lost_acks, lost_work_bounded, no_silent_hang,
                                           restarts_bounded, resume_exact)
from pschaos.harness.checkers.registry import CHECKERS

PLAN = {"job": {"steps": 6, "ckpt_every": 2, "hang_bound_s": 5.0, "tolerance": 0.0}}


def ev(t, f, type_="info", node="rank-0", **v):
    return {"t": t, "node": node, "type": type_, "f": f, "value": {"worker": node, **v}}


def run(steps_by_inc, resumes, audit=None, digest="d", ckpts=(), faults=(), final=True, exits=()):
    """A job history: per incarnation (its start time, the steps it acked), its resume step."""
    h = []
    for inc, (t0, steps) in steps_by_inc.items():
        h.append(ev(t0, "job-start", incarnation=inc))
        h.append(ev(t0 + 0.1, "job-resume", incarnation=inc, step=resumes[inc]))
        for i, s in enumerate(steps):
            h.append(ev(t0 + 0.2 + i, "step", "invoke", incarnation=inc, step=s))
            h.append(ev(t0 + 0.7 + i, "step", "ok", incarnation=inc, step=s))
    for t, s in ckpts:
        h.append(ev(t, "checkpoint", incarnation="0.0", step=s, phase="done"))
    for t, kind in faults:
        h.append({"t": t, "node": "harness", "type": "info", "f": "fault-start", "value": {"kind": kind, "target": "rank-1"}})
    for t, rc in exits:
        h.append({"t": t, "node": "agent", "type": "info", "f": "job-exit", "value": {"exit_code": rc}})
    if final:
        last = max(steps_by_inc)
        n = max(s for _, ss in steps_by_inc.values() for s in ss)
        h.append(ev(100, "job-final", incarnation=last, steps=n, audit=float(n if audit is None else audit),
                    digest=digest, values=[1.0, 2.0]))
    return sorted(h, key=lambda e: e["t"])


CLEAN = {"0.0": (0, [1, 2, 3]), "0.1": (10, [3, 4, 5, 6])}
RESUMES = {"0.0": 0, "0.1": 2}


def test_a_resumed_job_that_kept_every_update_passes_the_audit_checks():
    h = run(CLEAN, RESUMES, ckpts=[(2.8, 2)], faults=[(4.0, "kill")])
    assert job_no_lost_acks(h, PLAN).valid is True
    assert job_exactly_once(h, PLAN).valid is True
    assert lost_work_bounded(h, PLAN).valid is True
    assert restarts_bounded(h, PLAN).valid is True


def test_an_acknowledged_update_missing_from_the_audit_is_lost():
    v = job_no_lost_acks(run(CLEAN, RESUMES, audit=5), PLAN)
    assert v.valid is False and v.details["lost"] == 1


def test_an_update_applied_twice_shows_in_the_audit():
    v = job_exactly_once(run(CLEAN, RESUMES, audit=12), PLAN)
    assert v.valid is False and v.details["doubled"] == 6


def test_no_final_model_is_unknown_never_a_pass():
    h = run(CLEAN, RESUMES, final=False)
    for check in (job_no_lost_acks, job_exactly_once, resume_exact):
        assert check(h, {**PLAN, "baseline": {"digest": "d"}}).valid == "unknown"


def test_ranks_that_disagree_on_the_final_model_fail():
    h = run(CLEAN, RESUMES)
    h.append(ev(100, "job-final", node="rank-1", incarnation="0.1", steps=6, audit=7.0, digest="other"))
    assert job_no_lost_acks(h, PLAN).valid is False


def test_resume_exact_compares_with_the_fault_free_model():
    h = run(CLEAN, RESUMES, digest="abc")
    assert resume_exact(h, {**PLAN, "baseline": {"digest": "abc"}}).valid is True
    assert resume_exact(h, {**PLAN, "baseline": {"digest": "xyz", "values": [1.0, 2.0000001]}}).valid is False
    loose = {"job": {**PLAN["job"], "tolerance": 1e-3}, "baseline": {"digest": "xyz", "values": [1.0, 2.0000001]}}
    v = resume_exact(h, loose)
    assert v.valid is True and v.details["bit_identical"] is False
    assert resume_exact(h, {**PLAN, "baseline_error": "the fault-free run crashed"}).details["reason"] == \
        "the fault-free run crashed"


def test_redoing_more_than_a_checkpoint_interval_fails_lost_work_bounded():
    h = run({"0.0": (0, [1, 2, 3, 4, 5]), "0.1": (10, [1, 2, 3, 4, 5, 6])}, {"0.0": 0, "0.1": 0})
    v = lost_work_bounded(h, PLAN)
    assert v.valid is False and v.details["over"][0]["redone"] == 5


def test_resuming_from_an_older_checkpoint_than_the_newest_fails():
    h = run({"0.0": (0, [1, 2, 3, 4]), "0.1": (10, [3, 4, 5, 6])}, {"0.0": 0, "0.1": 2}, ckpts=[(2.8, 2), (4.8, 4)])
    assert lost_work_bounded(h, PLAN).valid is False


def test_a_job_silent_past_the_bound_after_a_fault_hangs():
    h = run({"0.0": (0, [1, 2]), "0.1": (20, [3, 4, 5, 6])}, {"0.0": 0, "0.1": 2}, faults=[(2.0, "pause")])
    v = no_silent_hang(h, PLAN)
    assert v.valid is False and v.details["hung"][0]["after_s"] > 5
    quick = run({"0.0": (0, [1, 2]), "0.1": (3, [3, 4, 5, 6])}, {"0.0": 0, "0.1": 2}, faults=[(2.0, "pause")])
    assert no_silent_hang(quick, PLAN).valid is True


def test_the_step_in_flight_at_the_fault_is_not_progress():
    h = run({"0.0": (0, [1, 2, 3])}, {"0.0": 0}, faults=[(1.9, "pause")], final=False)   # step 3 in flight
    v = no_silent_hang(h, PLAN)
    assert v.valid is False and v.details["hung"][0] == {"fault": "pause", "target": "rank-1", "at_step": 2,
                                                         "after_s": None}


def test_exiting_non_zero_within_the_bound_is_not_a_hang():
    h = run({"0.0": (0, [1, 2])}, {"0.0": 0}, faults=[(2.0, "kill")], exits=[(3.0, 1)], final=False)
    assert no_silent_hang(h, PLAN).valid is True
    assert no_silent_hang(run(CLEAN, RESUMES), PLAN).valid == "unknown"       # no fault: nothing judged


def test_restarts_beyond_what_the_faults_explain_fail():
    h = run({"0.0": (0, [1, 2]), "0.1": (5, []), "0.2": (8, []), "1.0": (12, [3, 4, 5, 6])},
            {"0.0": 0, "0.1": 2, "0.2": 2, "1.0": 2}, faults=[(2.0, "kill")])
    v = restarts_bounded(h, PLAN)
    assert v.valid is False and v.details["restarts"] == 3


def test_the_registry_judges_a_job_by_its_audit_and_psnodes_by_its_pushes():
    h = run(CLEAN, RESUMES, audit=5)
    assert CHECKERS["no-lost-acks"](h, PLAN).valid is False          # the job's audit: one lost
    assert CHECKERS["no-lost-acks"](h, {}).valid == "unknown"        # psnodes' checker: no push to judge


def test_goodput_counts_each_surviving_step_once():
    g = job_goodput(run(CLEAN, RESUMES))
    assert g["surviving_steps"] == 6 and g["restarts"] == 1
    assert 0 < g["ettr"] < 1
    assert job_goodput(run(CLEAN, RESUMES, final=False))["ettr"] is None


def test_the_killed_tasks_own_exit_is_not_the_job_answering_the_fault():
    h = run({"0.0": (0, [1, 2, 3])}, {"0.0": 0}, faults=[(4.0, "kill")], final=False)
    h.append({"t": 4.1, "node": "rank-1", "type": "info", "f": "job-exit", "value": {"process": "rank-1", "exit_code": -9}})
    v = no_silent_hang(sorted(h, key=lambda e: e["t"]), PLAN)
    assert v.valid is False and v.details["hung"][0]["after_s"] is None


def test_a_job_that_spent_its_restarts_fails_restarts_bounded():
    h = run(CLEAN, RESUMES, faults=[(4.0, "kill")])
    assert restarts_bounded(h, PLAN).valid is True
    h.append({"t": 50, "node": "harness", "type": "info", "f": "job-gave-up", "value": {"incarnation": 3}})
    assert restarts_bounded(h, PLAN).valid is False


def test_resume_exact_at_bit_identity_fails_another_digest_whatever_the_values_say():
    """Review: at tolerance 0 a digest mismatch went on to the values, and -0.0 against 0.0 (or
    equal rounded values) passed; a NaN compared as close under a tolerance."""
    h = run(CLEAN, RESUMES, digest="abc")
    v = resume_exact(h, {**PLAN, "baseline": {"digest": "xyz", "values": [1.0, 2.0]}})
    assert v.valid is False and v.details["bit_identical"] is False and v.details["resumed"] is True
    loose = {"job": {**PLAN["job"], "tolerance": 1.0}, "baseline": {"digest": "xyz", "values": [float("nan"), 2.0]}}
    v = resume_exact(h, loose)
    assert v.valid is False and v.details["why"] == "a value is not finite"


def test_the_final_model_is_the_newest_incarnation_counted_as_numbers():
    """Review: "9.0" sorted after "10.0" as a string, and an old incarnation's model was judged."""
    h = [ev(1, "job-final", incarnation="9.0", steps=6, audit=6.0, digest="old"),
         ev(2, "job-final", incarnation="10.0", steps=6, audit=6.0, digest="new")]
    assert resume_exact(h, {**PLAN, "baseline": {"digest": "new"}}).valid is True


def test_progress_without_a_single_step_seen_is_unknown():
    from pschaos.harness.checkers.progress import workload_progress

    watch = {"t": 1, "node": "harness", "type": "info", "f": "progress-watch",
             "value": {"bound_s": 90.0, "polls": 3, "steps_seen": 0, "longest_quiet_s": 1.5}}
    assert workload_progress([watch], {}).valid == "unknown"
    watch["value"]["steps_seen"] = 4
    assert workload_progress([watch], {}).valid is True


def test_the_stall_watch_does_not_count_failed_steps_as_progress(tmp_path):
    import json

    from pschaos.harness.run.stall import StallWatch

    f = tmp_path / "rank-0.jsonl"
    failed = {"t": 1, "node": "rank-0", "type": "info", "f": "step", "value": {"worker": "rank-0", "step": 1,
                                                                               "error": "RuntimeError: gloo"}}
    f.write_text(json.dumps(failed) + "\n")
    w = StallWatch(lambda: [f], 1.0, 0.0, period_s=0.1)
    assert w.tick(0.5, False) is None and w.tick(2.0, False) == 2.0 and w.steps == 0
    with f.open("a") as out:
        out.write(json.dumps({**failed, "type": "ok", "value": {"worker": "rank-0", "step": 1}}) + "\n")
    assert w.tick(2.5, False) is None and w.steps == 1


def test_recovery_is_the_time_from_each_fault_to_a_step_past_the_one_in_flight():
    from pschaos.harness.run.metrics import compute

    h = run(CLEAN, RESUMES, faults=[(2.5, "kill")])       # steps 1, 2 acked by then; 3 in flight
    m = compute(h, PLAN)
    assert m["recovery_s"]["n"] == 1 and m["recovery_s"]["max"] == round(11.7 - 2.5, 1)   # step 4 of incarnation 0.1
    never = run({"0.0": (0, [1, 2, 3])}, {"0.0": 0}, faults=[(2.9, "kill")])
    assert compute(never, PLAN)["recovery_s"]["max"] == "inf"
    assert "recovery_s" not in compute([], {})


def test_a_delayed_kill_is_answered_only_by_steps_after_it_landed():
    """Review: the fault's time is when it came due; with `after_s` the steps made before the kill
    landed were read as the job coming back, and a job that hung after the kill passed."""
    h = run({"0.0": (0, [1, 2, 3, 4, 5])}, {"0.0": 0}, faults=[(1.0, "kill")], final=False)
    next(e for e in h if e["f"] == "fault-start")["value"]["in_place_after_s"] = 3.0   # landed at 4.0
    v = no_silent_hang(h, PLAN)
    assert v.valid is False and v.details["hung"][0]["after_s"] is None


def test_a_rank_whose_collective_timed_out_answered_the_fault():
    """CI (ddp-pause-rank, a loaded machine): rank-1 frozen for 45 s; rank-0 and rank-2's
    all-reduce timed out 5 s in and their steps failed with the error, yet the check waited for
    the group's restart after the heal (67 s) and failed a job that was not silent. The frozen
    rank's own error, after its thaw, is no answer."""
    h = run({"0.0": (0, [1, 2, 3])}, {"0.0": 0}, faults=[(3.0, "pause")], final=False)
    h.append(ev(8.0, "step", "info", node="rank-0", incarnation="0.0", step=4, error="RuntimeError: Timed out"))
    v = no_silent_hang(sorted(h, key=lambda e: e["t"]), PLAN)
    assert v.valid is True and v.details["faults"][0]["after_s"] == 5.0
    own = run({"0.0": (0, [1, 2, 3])}, {"0.0": 0}, faults=[(3.0, "pause")], final=False)
    own.append(ev(8.0, "step", "info", node="rank-1", incarnation="0.0", step=4, error="RuntimeError: Timed out"))
    assert no_silent_hang(sorted(own, key=lambda e: e["t"]), PLAN).valid is False
