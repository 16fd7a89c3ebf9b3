"""Training goes on through the faults and every worker finishes the workload it was given."""
from __future__ import annotations

from pschaos.harness.checkers.base import Verdict, by_f, unknown


def expected_workers(history: list[dict], ctx: dict) -> list[str]:
    """Workers the scenario gave a workload: the cluster's, plus scale-out's, minus scale-in's.

    A worker killed or stopped and then healed is expected to finish too: a heal restarts it."""
    out = list(ctx.get("workers", []))
    for e in by_f(history, "fault-start"):
        v = e["value"]
        out += [w for w in v.get("added", []) if w not in out]
        out = [w for w in out if w not in v.get("removed", [])]
    return out


def last_runs(history: list[dict]) -> dict[str, dict]:
    """Each worker's last train-done (a restarted worker's last incarnation)."""
    return {e["value"]["worker"]: e["value"] for e in by_f(history, "train-done")}


def short_of_workload(history: list[dict], ctx: dict) -> tuple[list[str], list[dict]]:
    """Expected workers with no train-done, and those whose last run did fewer steps than given."""
    done = last_runs(history)
    expected = expected_workers(history, ctx)
    missing = [w for w in expected if w not in done]
    steps = ctx.get("steps")
    short = [{"worker": w, "steps": done[w]["steps"], "given": steps} for w in expected
             if w in done and steps and not ctx.get("duration_s") and done[w]["steps"] < steps]
    return missing, short


def converged(history: list[dict], ctx: dict) -> Verdict:
    """Every worker the scenario gave a workload finished all of it, at or below the model's target loss."""
    done = last_runs(history)
    if not done:
        return unknown("no worker finished: there is no final loss to judge")
    missing, short = short_of_workload(history, ctx)
    expected = expected_workers(history, ctx)
    over = {w: round(d["final_loss"], 4) for w, d in done.items()
            if w in expected and not d["final_loss"] <= d["target_loss"]}
    errors = len(by_f(history, "train-error"))
    return Verdict(not missing and not short and not over, {
        "final_loss": {w: round(d["final_loss"], 5) for w, d in done.items()},
        "target_loss": next((d["target_loss"] for d in done.values()), None),
        "missing_workers": missing, "short_runs": short, "above_target": over, "step_errors": errors})
