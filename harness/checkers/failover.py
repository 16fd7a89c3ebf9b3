"""Failover time: from a fault on a primary to the first ack by its successor."""
from __future__ import annotations

from .base import Verdict, by_f


def failover_times(history: list[dict]) -> list[dict]:
    """One entry per fault that hit a primary: the ms until a higher epoch acked a push on its shard."""
    oks = by_f(history, "push", "ok")
    out = []
    for f in by_f(history, "fault-start"):
        v = f["value"]
        if v.get("isolated_primary"):      # a partition or link-down that cut a primary off
            v = {**v, **v["isolated_primary"], "target": v["isolated_primary"]["node"], "was_primary": True}
        if not v.get("was_primary"):
            continue
        first = next((e for e in oks if e["t"] >= f["t"] and e["value"]["shard"] == v["shard"]
                      and e["value"]["epoch"] > v["epoch"]), None)
        out.append({"shard": v["shard"], "target": v["target"], "kind": v["kind"], "fault_t": f["t"],
                    "ms": None if first is None else round((first["t"] - f["t"]) * 1000, 1),
                    "new_epoch": None if first is None else first["value"]["epoch"]})
    return out


def failover_budget(history: list[dict], ctx: dict) -> Verdict:
    times = failover_times(history)
    budget = ctx.get("failover_budget_ms", 800)
    if not times:
        return Verdict("unknown", {"reason": "no fault hit a primary"})
    slow = [t for t in times if t["ms"] is None or t["ms"] > budget]
    return Verdict(not slow, {"failovers": times, "budget_ms": budget, "over_budget": slow})
