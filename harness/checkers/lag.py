"""lag-bounded: async replication's back-pressure holds: no in-sync replica trails its primary by
more than `max_lag` entries (plus what was in flight while the two were sampled).

An async primary acks before its replicas apply, and bounds how far they may trail by making a
push wait while one is `max_lag` behind (psnodes/core/ack.py within_lag: checked and applied under
one lock, so the head is at most max_lag + 1 ahead of what the primary knows a replica holds;
the replica holds at least that). With the bound switched off nothing in the library's other
checks changes: no lag ever built up. So the evidence is the harness' own samples: at each tick
the primary's seq and each replica's, both at the same epoch, the replica in the ISR at that
moment (a replica dropped from the ISR is no longer bounded). The two status calls are not one
instant: the pushes the shard acknowledged between them are allowed on top.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict

from pschaos.harness.checkers.base import Verdict, by_f, unknown
from pschaos.harness.checkers.durable_acks import _isr_at, _isr_timeline


def observed_lags(history: list[dict]) -> list[dict]:
    """Per sampling tick and replica: the primary's seq minus the replica's, the allowance for
    pushes acknowledged between the two samples, and whether the replica was in the ISR."""
    ticks: dict[tuple[int, int], list[tuple[float, dict]]] = defaultdict(list)
    for e in by_f(history, "sample"):
        v = e["value"]
        ticks[(v.get("tick"), v.get("shard"))].append((e["t"], v))
    acked: dict[int, list[float]] = defaultdict(list)
    for e in by_f(history, "push", "ok"):
        acked[e["value"].get("shard")].append(e["t"])
    for ts in acked.values():
        ts.sort()
    isr = _isr_timeline(history)
    starts: dict[str, list[float]] = defaultdict(list)
    for e in by_f(history, "start"):
        starts[e.get("node")].append(e["t"])
    for ts in starts.values():            # a copy's first start is its boot, not a restart
        ts.sort()
        del ts[:1]
    out = []
    for (tick, shard), xs in ticks.items():
        prim = [(t, v) for t, v in xs if v.get("role") == "primary"]
        if len(prim) != 1:
            continue
        tp, p = prim[0]
        line = isr.get((shard, p["epoch"]), [])
        for tr, r in xs:
            if r.get("role") != "replica" or r.get("epoch") != p["epoch"]:
                continue
            lo, hi = sorted((tp, tr))
            began = line[0][0] if line else float("-inf")
            if any(began < s < hi for s in starts.get(r["node"], ())):
                continue          # restarted in this epoch: it comes back at its checkpoint and catches up
            # pushes acked between the two samples raise the primary's seq only when the replica was
            # read first; read after the primary, the replica's own progress shrinks the lag seen
            between = bisect_right(acked[shard], hi) - bisect_left(acked[shard], lo) if tr < tp else 0
            out.append({"tick": tick, "shard": shard, "epoch": p["epoch"], "primary": p["node"], "replica": r["node"],
                        "lag": p["seq"] - r["seq"], "in_flight": between, "t": round(tp, 3),
                        "in_isr": r["node"] in _isr_at(line, max(tp, tr))})
    return out


def max_lag_seen(history: list[dict]) -> int | None:
    """The largest sampled lag of an in-sync replica (None: no pair sampled)."""
    lags = [x["lag"] for x in observed_lags(history) if x["in_isr"]]
    return max(lags) if lags else None


def lag_bounded(history: list[dict], ctx: dict) -> Verdict:
    """Async mode: every sampled in-sync replica trails its primary by at most max_lag + 1 entries,
    plus the pushes acknowledged between the two samples and one applied-but-unacknowledged push per
    worker; a replica restarted in that epoch is not judged (it catches up from its checkpoint)."""
    if ctx.get("replication", "sync") != "async":
        return unknown("sync replication acks only what its replicas applied: there is no lag bound to judge")
    bound = ctx.get("max_lag")
    if not isinstance(bound, int):
        return unknown("the run's context names no max_lag: nothing to hold the lag against")
    lags = [x for x in observed_lags(history) if x["in_isr"]]
    if not lags:
        return unknown("no tick sampled a primary and an in-sync replica of the same epoch")
    # each worker may have one push applied but not yet acknowledged while the two were sampled
    slack = len(ctx.get("workers") or []) or 1
    over = [x for x in lags if x["lag"] > bound + 1 + x["in_flight"] + slack]
    return Verdict(not over, {"max_lag": bound, "pairs": len(lags), "max_seen": max(x["lag"] for x in lags),
                              "workers_slack": slack,
                              "over": sorted(over, key=lambda x: -x["lag"])[:10], "over_count": len(over)})
