"""Training goes on through the faults and reaches the task's target loss."""
from __future__ import annotations

from .base import Verdict, by_f


def converged(history: list[dict], ctx: dict) -> Verdict:
    stopped = set()     # workers a fault stopped on purpose are not held to the full run
    for e in by_f(history, "fault-start"):
        stopped.update(e["value"].get("removed", []))
        if e["value"]["target"].startswith("worker-") and e["value"]["kind"] in ("kill", "stop"):
            stopped.add(e["value"]["target"])
    done = {w: d for w, d in ((e["value"]["worker"], e["value"]) for e in by_f(history, "train-done"))
            if w not in stopped}
    expected = [w for w in ctx.get("workers", []) if w not in stopped]
    missing = [w for w in expected if w not in done]
    short = [w for w, d in done.items() if ctx.get("steps") and d["steps"] < ctx["steps"]
             and not ctx.get("duration_s")]
    over = {w: round(d["final_loss"], 4) for w, d in done.items() if not d["final_loss"] <= d["target_loss"]}
    errors = len(by_f(history, "train-error"))
    return Verdict(not missing and not short and not over, {
        "final_loss": {w: round(d["final_loss"], 5) for w, d in done.items()},
        "target_loss": next((d["target_loss"] for d in done.values()), None),
        "missing_workers": missing, "short_runs": short, "above_target": over, "step_errors": errors})
