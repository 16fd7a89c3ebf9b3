"""Failover time: from a fault on a primary to the first ack by its successor."""
from __future__ import annotations

from pschaos.harness.checkers.base import Verdict, by_f


def failover_times(history: list[dict]) -> list[dict]:
    """One entry per fault that hit a primary: the ms until a higher epoch acked a push on its
    shard, looked for until the next fault that hits that shard's primary after this one healed
    (a later failover is that fault's, not this one's; faults injected together share theirs).

    A partition that cut a primary off can be ridden out: its lease outlives a short cut, so no
    successor is elected and the same primary acks on at its epoch once the cut heals. So can a
    pause that no copy could succeed (the others restarting, out of the ISR). Such a fault (no
    promotion on its shard, and its primary acking at its epoch after the heal) is not a
    failover and is left out (before, the next fault's failover was counted for it: a 14 s
    "failover" on a nemesis-soak seed). Without that evidence, a cut, a kill or a
    pause with no successor stays in with ms None (never completed). A kill timed to a moment
    is timed from the primary's own kill (`primary_killed_after_s` into the fault) to an ack above the epoch it
    names (`failover_after_epoch`: a successor killed mid-promotion ends nothing)."""
    # an adapted system's updates count where its client knew the primary's term (Redis: Sentinel's
    # config epoch); a system whose updates carry none (etcd here) leaves its failovers untimed
    oks = by_f(history, "push", "ok") + [e for e in by_f(history, "update", "ok") if "epoch" in e["value"]]
    if not oks and by_f(history, "update", "ok"):
        return []
    oks.sort(key=lambda e: e["t"])
    promotes = by_f(history, "promote")
    stops = {e["value"]["index"]: e["t"] for e in by_f(history, "fault-stop") if "index" in e["value"]}
    hits = []
    for f in by_f(history, "fault-start"):
        v = f["value"]
        isolated = bool(v.get("isolated_primary"))
        if isolated:      # a partition or link-down that cut a primary off
            v = {**v, **v["isolated_primary"], "target": v["isolated_primary"]["node"], "was_primary": True}
        if v.get("was_primary"):
            t = f["t"] + v.get("primary_killed_after_s", 0.0)
            hits.append((t, stops.get(v.get("index"), t), v, isolated))
    out = []
    for t, healed, v, isolated in hits:
        until = min((u for u, _, w, _ in hits if w["shard"] == v["shard"] and u > healed), default=float("inf"))
        above = v.get("failover_after_epoch", v["epoch"])
        first = next((e for e in oks if t <= e["t"] < until and e["value"]["shard"] == v["shard"]
                      and e["value"]["epoch"] > above), None)
        # a cut or a pause can be ridden out (no copy eligible to succeed it: a pause while the
        # others restart, nemesis-soak seed 136); a kill never is: its primary is gone
        rode_out = first is None and (isolated or v["kind"] == "pause") and not any(
            t <= e["t"] < until and e["value"].get("shard") == v["shard"] and e["value"].get("epoch", 0) > v["epoch"]
            for e in promotes) and any(
            healed <= e["t"] < until and e["value"]["shard"] == v["shard"] and e["value"]["epoch"] == v["epoch"]
            and e["value"].get("node") == v["target"] for e in oks)
        if rode_out:
            continue
        out.append({"shard": v["shard"], "target": v["target"], "kind": v["kind"], "fault_t": t,
                    "ms": None if first is None else round((first["t"] - t) * 1000, 1),
                    "new_epoch": None if first is None else first["value"]["epoch"]})
    return out


def failover_budget(history: list[dict], ctx: dict) -> Verdict:
    """Every fault on a primary was followed by its successor's first ack within the budget
    (failover_budget_ms, default 800); unknown when no fault hit a primary."""
    times = failover_times(history)
    budget = ctx.get("failover_budget_ms", 800)
    if not times:
        return Verdict("unknown", {"reason": "no fault hit a primary"})
    slow = [t for t in times if t["ms"] is None or t["ms"] > budget]
    return Verdict(not slow, {"failovers": times, "budget_ms": budget, "over_budget": slow})
