"""Failover time: from a fault on a primary to the first ack by its successor."""
from __future__ import annotations

from .base import Verdict, by_f


def failover_times(history: list[dict]) -> list[dict]:
    """One entry per fault that hit a primary: the ms until a higher epoch acked a push on its
    shard, looked for only until the next fault that hits that shard's primary (a later
    failover is that fault's, not this one's).

    A partition that cut a primary off can be ridden out: its lease outlives a short cut, so no
    successor is elected. Such a fault, with no promotion on its shard before the next one, is
    not a failover and is left out (before, the next fault's failover was counted for it: a 14 s
    "failover" on a nemesis-soak seed). A kill or pause of a primary is always expected to fail
    over: one without a successor stays in, with ms None (never completed)."""
    oks = by_f(history, "push", "ok")
    promotes = by_f(history, "promote")
    hits = []
    for f in by_f(history, "fault-start"):
        v = f["value"]
        isolated = bool(v.get("isolated_primary"))
        if isolated:      # a partition or link-down that cut a primary off
            v = {**v, **v["isolated_primary"], "target": v["isolated_primary"]["node"], "was_primary": True}
        if v.get("was_primary"):
            hits.append((f["t"], v, isolated))
    out = []
    for i, (t, v, isolated) in enumerate(hits):
        until = next((u for u, w, _ in hits[i + 1:] if w["shard"] == v["shard"]), float("inf"))
        first = next((e for e in oks if t <= e["t"] < until and e["value"]["shard"] == v["shard"]
                      and e["value"]["epoch"] > v["epoch"]), None)
        if first is None and isolated and not any(
                t <= e["t"] < until and e["value"].get("shard") == v["shard"] and e["value"].get("epoch", 0) > v["epoch"]
                for e in promotes):
            continue
        out.append({"shard": v["shard"], "target": v["target"], "kind": v["kind"], "fault_t": t,
                    "ms": None if first is None else round((first["t"] - t) * 1000, 1),
                    "new_epoch": None if first is None else first["value"]["epoch"]})
    return out


def failover_budget(history: list[dict], ctx: dict) -> Verdict:
    times = failover_times(history)
    budget = ctx.get("failover_budget_ms", 800)
    if not times:
        return Verdict("unknown", {"reason": "no fault hit a primary"})
    slow = [t for t in times if t["ms"] is None or t["ms"] > budget]
    return Verdict(not slow, {"failovers": times, "budget_ms": budget, "over_budget": slow})
