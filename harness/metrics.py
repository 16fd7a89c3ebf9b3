"""Run metrics computed from the history (the `metrics` block of report.json)."""
from __future__ import annotations

import numpy as np

from reports.bounds import holds, parse, value_at

from .checkers.acks import no_lost_acks
from .checkers.base import by_f
from .checkers.failover import failover_times


def percentiles(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    a = np.asarray(xs, dtype=float)
    return {"p50": round(float(np.percentile(a, 50)), 1), "p99": round(float(np.percentile(a, 99)), 1),
            "max": round(float(a.max()), 1)}


def compute(history: list[dict], ctx: dict) -> dict:
    oks = by_f(history, "push", "ok")
    lost = no_lost_acks(history, ctx)
    fo = failover_times(history)
    done = [e["value"]["final_loss"] for e in by_f(history, "train-done")]
    syncs = [e["value"] for e in by_f(history, "sync")]
    pulls = [e["value"].get("pulled_bytes", 0) for e in by_f(history, "train-step")]
    return {
        "acked_updates": len(oks),
        "lost_acked_updates": lost.details.get("lost") if lost.valid != "unknown" else None,
        "failovers": len([e for e in by_f(history, "promote") if e["value"]["epoch"] > 1]),
        "failover_ms": percentiles([f["ms"] for f in fo if f["ms"] is not None]),
        "final_loss": round(float(np.mean(done)), 6) if done else None,
        "baseline_loss": None,
        "sync_bytes": sum(s["bytes"] for s in syncs),
        "changed_bytes": sum(s["changed_bytes"] for s in syncs),
        "snapshot_bytes": sum(s["snapshot_bytes"] for s in syncs),
        "worker_pull_bytes": int(sum(pulls)),
        "duplicate_acks": sum(1 for e in oks if e["value"].get("duplicate")),
        "steps": sum(e["value"]["steps"] for e in by_f(history, "train-done")),
        "first_step_s": next((round(e["t"], 3) for e in by_f(history, "train-step")), None),
    }


def check_bounds(metrics: dict, bounds: list[str]) -> list[dict]:
    """Each bound with its value and whether it holds (None value: the metric is absent)."""
    out = []
    for b in bounds:
        name, op, num = parse(b)
        val = value_at(metrics, name)
        out.append({"bound": b, "metric": name, "value": val, "holds": holds(val, op, num)})
    return out
