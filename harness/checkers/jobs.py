"""Checks of a training job we did not write, pure functions of its history (the step shim's records).

The oracle is independent of the system's bookkeeping: the audit variable the job's model
carries (raised by one per logical update through the system's own update path) against the
steps the shim saw acknowledged, and the final model's digest against a fault-free run's. Each
fails closed: no final model, no plan, no fault-free run is `unknown`, with the reason.
"""
from __future__ import annotations

import math

from pschaos.harness.checkers.base import Verdict, by_f, unknown, victims

RESTARTING_FAULTS = ("kill", "stop", "pause")


def _plan(ctx: dict) -> dict | None:
    return ctx.get("job")


def final_model(history: list[dict]) -> tuple[dict | None, str | None]:
    """The final model as the last incarnation's ranks reported it; an error when they disagree."""
    finals = [e["value"] for e in by_f(history, "job-final")]
    if not finals:
        return None, None
    last = max((f["incarnation"] for f in finals), key=incarnation_order)
    mine = [f for f in finals if f["incarnation"] == last]
    if len({(f["digest"], f["audit"], f["steps"]) for f in mine}) > 1:
        return mine[0], "the ranks of incarnation " + last + " report different final models: " + \
            ", ".join(f"{f['worker']}: audit {f['audit']}, digest {f['digest'][:12]}" for f in mine)
    return mine[0], None


def incarnation_order(inc: str) -> tuple:
    """"H.T" (the harness's restarts, then the launcher's) as numbers: "10.0" comes after "9.0"."""
    try:
        return tuple(int(x) for x in str(inc).split("."))
    except ValueError:
        return (float("inf"), str(inc))


def _acked(history: list[dict]) -> set[int]:
    return {e["value"]["step"] for e in by_f(history, "step", "ok")}


def job_no_lost_acks(history: list[dict], ctx: dict) -> Verdict:
    """Every logical update the shim saw acknowledged is in the final model: the audit variable
    holds at least as many updates as there were distinct acknowledged steps."""
    final, err = final_model(history)
    if final is None:
        return unknown("no rank reported a final model (job-final): the job did not finish, so what it kept "
                       "cannot be read", restarts=len(by_f(history, "job-restart")))
    acked = _acked(history)
    details = {"audit": final["audit"], "acked_steps": len(acked), "final_steps": final["steps"],
               "planned_steps": (_plan(ctx) or {}).get("steps")}
    if err:
        return Verdict(False, {**details, "error": err})
    lost = len(acked) - int(final["audit"])
    over = sorted(s for s in acked if s > final["steps"])
    return Verdict(lost <= 0 and not over, {**details, "lost": max(lost, 0), "acked_beyond_final": over[:20]})


def job_exactly_once(history: list[dict], ctx: dict) -> Verdict:
    """No logical update applied twice: the audit variable is at most the distinct steps invoked."""
    final, err = final_model(history)
    if final is None:
        return unknown("no rank reported a final model (job-final): nothing to count the updates in")
    invoked = {e["value"]["step"] for e in by_f(history, "step", "invoke")}
    doubled = int(final["audit"]) - len(invoked)
    details = {"audit": final["audit"], "invoked_steps": len(invoked), "doubled": max(doubled, 0)}
    if err:
        return Verdict(False, {**details, "error": err})
    return Verdict(doubled <= 0, details)


def resumes(history: list[dict]) -> list[dict]:
    """Each incarnation's resume: the step its checkpoint held (the lowest any rank resumed from)."""
    out: dict[str, dict] = {}
    for e in by_f(history, "job-resume"):
        v = e["value"]
        r = out.setdefault(v["incarnation"], {"incarnation": v["incarnation"], "step": v["step"], "t": e["t"]})
        r["step"], r["t"] = min(r["step"], v["step"]), min(r["t"], e["t"])
    return sorted(out.values(), key=lambda r: r["t"])


def resume_exact(history: list[dict], ctx: dict) -> Verdict:
    """The final model equals the fault-free run's with the same seed: bit-identical by digest,
    or within the scenario's `tolerance` on every value (the report says which)."""
    base = ctx.get("baseline")
    if not base:
        return unknown(ctx.get("baseline_error") or "no fault-free run to compare with (baseline missing)")
    final, err = final_model(history)
    if final is None:
        return unknown("no rank reported a final model (job-final): nothing to compare")
    rs = [{"incarnation": r["incarnation"], "resumed_from": r["step"]} for r in resumes(history)]
    details = {"digest": final["digest"], "baseline_digest": base["digest"], "resumes": rs,
               "resumed": any(r["resumed_from"] > 0 for r in rs),
               "tolerance": (_plan(ctx) or {}).get("tolerance", 0.0)}
    if err:
        return Verdict(False, {**details, "error": err})
    if final["digest"] == base["digest"]:
        return Verdict(True, {**details, "bit_identical": True})
    tol, a, b = details["tolerance"], final.get("values"), base.get("values")
    if not tol:       # bit-identity asked: another digest is another model, whatever the values say
        return Verdict(False, {**details, "bit_identical": False})
    if not a or not b or len(a) != len(b):
        return Verdict(False, {**details, "bit_identical": False, "why": "no values recorded to apply the tolerance to"})
    diffs = [abs(x - y) for x, y in zip(a, b)]
    if not all(math.isfinite(d) for d in diffs):     # a NaN or inf never compares as close
        return Verdict(False, {**details, "bit_identical": False, "why": "a value is not finite"})
    return Verdict(max(diffs) <= tol, {**details, "bit_identical": False, "max_abs_diff": max(diffs)})


def lost_work_bounded(history: list[dict], ctx: dict) -> Verdict:
    """After each restart, the steps recomputed are at most the checkpoint interval plus the step
    in flight, and the job resumed from the newest checkpoint it had written."""
    plan = _plan(ctx)
    if not plan or not plan.get("ckpt_every"):
        return unknown("the run names no checkpoint interval (context job.ckpt_every)")
    bound = plan["ckpt_every"] + 1
    oks = [(e["t"], e["value"]["step"]) for e in by_f(history, "step", "ok")]
    saved = [(e["t"], e["value"]["step"]) for e in by_f(history, "checkpoint") if e["value"].get("phase") == "done"]
    rs, out, bad = resumes(history), [], []
    for r in rs[1:]:
        before = max((s for t, s in oks if t < r["t"]), default=0)
        newest = max((s for t, s in saved if t < r["t"]), default=0)
        row = {"incarnation": r["incarnation"], "resumed_from": r["step"], "done_before": before,
               "redone": max(0, before - r["step"]), "newest_checkpoint": newest}
        out.append(row)
        if row["redone"] > bound or r["step"] < newest:
            bad.append(row)
    if not rs:
        return unknown("no incarnation of the job recorded its start (job-resume): nothing ran")
    return Verdict(not bad, {"bound": bound, "restarts": out, "over": bad})


def no_silent_hang(history: list[dict], ctx: dict) -> Verdict:
    """After every fault the job trains past where it was (beyond the step in flight), exits
    non-zero, or fails a step with an error on a rank the fault did not hit (its collective timed
    out), within `hang_bound_s`; one that does none of these (stuck in a collective) fails."""
    plan = _plan(ctx)
    if not plan or not plan.get("hang_bound_s"):
        return unknown("the run names no hang bound (context job.hang_bound_s)")
    bound = plan["hang_bound_s"]
    rows = answers(history)
    if not rows:
        return unknown("no fault fired: there is nothing the job had to come back from")
    out = [{k: r[k] for k in ("fault", "target", "at_step", "after_s")} for r in rows]
    bad = [r for r in out if r["after_s"] is None or r["after_s"] > bound]
    return Verdict(not bad, {"bound_s": bound, "faults": out, "hung": bad})


def answers(history: list[dict]) -> list[dict]:
    """Per fault: how long until the job answered it (`after_s`: trained past the step in
    flight, exited non-zero, or failed a step with an error on a role the fault did not hit;
    None: none of these) and until it trained again (`back_s`, the
    recovery time in report.json's metrics; None: it never did)."""
    oks = sorted((e["t"], e["value"]["step"]) for e in by_f(history, "step", "ok"))
    # (time, process): a failed exit, giving up, or the final model; the fault's own victim's exit
    # (a killed task's -9) is the fault landing, not the job answering it
    ends = sorted([(e["t"], e["value"].get("process")) for e in by_f(history, "job-exit")
                   if e["value"].get("exit_code") not in (0, None)]
                  # a step that failed with an error on a rank: its collective timed out, it is not
                  # stuck (the shim records it as the exception leaves the step)
                  + [(e["t"], e.get("node")) for e in by_f(history, "step", "info") if e["value"].get("error")]
                  + [(e["t"], None) for e in by_f(history, "job-gave-up")]
                  + [(e["t"], None) for e in by_f(history, "job-final")])
    rows = []
    for f in by_f(history, "fault-start"):
        # from when it landed: a kill delayed (`after_s`) or timed to a moment is recorded when it
        # came due, and steps made before it landed are no answer to it
        t0 = f["t"] + float(f["value"].get("in_place_after_s") or 0)
        at = max((s for t, s in oks if t <= t0), default=0)
        # past the step in flight: a step whose all-reduce had all its parts when the fault
        # landed completes just after it, and says nothing of the job coming back
        nxt = next((t for t, s in oks if t > t0 and s > at + 1), None)
        hit = set(victims(f["value"]))
        end = next((t for t, proc in ends if t > t0 and proc not in hit), None)
        back = min(x for x in (nxt, end, float("inf")) if x is not None)
        rows.append({"fault": f["value"].get("kind"), "target": f["value"].get("target"), "at_step": at,
                     "after_s": None if back == float("inf") else round(back - t0, 3),
                     "back_s": None if nxt is None else round(nxt - t0, 3)})
    return rows


def restarts_bounded(history: list[dict], ctx: dict) -> Verdict:
    """The job restarted no more often than its faults explain: one restart per process fault."""
    starts = {e["value"]["incarnation"] for e in by_f(history, "job-start")}
    if not starts:
        return unknown("no process of the job recorded its start (job-start): nothing ran")
    explained = sum(1 for e in by_f(history, "fault-start") if e["value"].get("kind") in RESTARTING_FAULTS)
    restarts = len(starts) - 1
    gave_up = bool(by_f(history, "job-gave-up"))       # restarts spent: a loop, whatever was counted
    return Verdict(restarts <= explained and not gave_up, {"restarts": restarts, "explained_by_faults": explained,
                                           "incarnations": sorted(starts),
                                           "gave_up": gave_up})


def for_jobs(native, job_check):
    """psnodes' checker, or the training job's when the run is one (its context names a plan)."""
    def check(history: list[dict], ctx: dict) -> Verdict:
        return (job_check if "job" in ctx else native)(history, ctx)
    check.__doc__, check.__name__ = native.__doc__, native.__name__
    return check
