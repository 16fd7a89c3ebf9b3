"""No acknowledged update lost; every update applied exactly once."""
from __future__ import annotations

from .base import Verdict, by_f, final_states


def _contains(ranges: list[list[int]], x: int) -> bool:
    return any(lo <= x <= hi for lo, hi in ranges)


def _primaries(history: list[dict]) -> dict[int, dict]:
    out = {}
    for s in final_states(history):
        if s.get("alive") and s.get("role") == "primary":
            if s["shard"] not in out or s["epoch"] > out[s["shard"]]["epoch"]:
                out[s["shard"]] = s
    return out


def acked(history: list[dict]) -> list[dict]:
    return [e["value"] for e in by_f(history, "push", "ok")]


def no_lost_acks(history: list[dict], ctx: dict) -> Verdict:
    """Every push a client saw acknowledged is in the final primary's applied set.

    Sync mode allows none lost; async mode allows at most `max_lag` per failover (the configured
    replication window), and reports the count either way.
    """
    prim = _primaries(history)
    oks = acked(history)
    shards = {v["shard"] for v in oks}
    missing_primary = sorted(s for s in shards if s not in prim)
    if missing_primary:
        return Verdict("unknown", {"reason": f"no live primary at the end for shards {missing_primary}"})
    lost = [v for v in oks if not _contains(prim[v["shard"]]["applied"].get(v["worker"], []), v["req_id"])]
    mode = ctx.get("replication", "sync")
    failovers = len([e for e in by_f(history, "promote") if e["value"]["epoch"] > 1])
    allowed = 0 if mode == "sync" else ctx.get("max_lag", 256) * max(failovers, 0)
    return Verdict(len(lost) <= allowed, {
        "acked": len(oks), "lost": len(lost), "allowed": allowed, "mode": mode,
        "examples": [{k: v[k] for k in ("worker", "req_id", "shard", "epoch", "seq")} for v in lost[:10]]})


def exactly_once(history: list[dict], ctx: dict) -> Verdict:
    """No idempotency key applied twice: at most one non-duplicate ack per key, and every copy's
    applied-push count equals the number of keys in its applied set."""
    applied_by: dict[tuple, list] = {}
    for v in acked(history):
        if not v.get("duplicate"):
            applied_by.setdefault((v["shard"], v["worker"], v["req_id"]), []).append(v["seq"])
    twice = {k: s for k, s in applied_by.items() if len(s) > 1}
    mismatched = []
    for s in final_states(history):
        if not s.get("alive"):
            continue
        keys = sum(hi - lo + 1 for rs in s["applied"].values() for lo, hi in rs)
        if keys != s["pushes"]:
            mismatched.append({"node": s["node"], "pushes": s["pushes"], "keys": keys})
    retried = len(by_f(history, "push", "invoke")) - len({(e["value"]["worker"], e["value"]["req_id"])
                                                          for e in by_f(history, "push", "invoke")})
    dups = sum(1 for v in acked(history) if v.get("duplicate"))
    return Verdict(not twice and not mismatched, {
        "applied_twice": [list(k) + [s] for k, s in list(twice.items())[:10]],
        "count_mismatch": mismatched, "duplicate_acks": dups, "reinvoked": retried})
