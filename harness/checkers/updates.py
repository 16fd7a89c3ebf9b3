"""Checkers for an adapted system's updates and reads (harness/adapters/workload.py).

An update is acknowledged (`ok`), refused (`fail`: surely not applied) or indeterminate (`info`:
it may have been applied). At the end the harness reads back, from the primary, each key's
applied op ids, its count and its float sum (`final-read`). These checkers are pure functions
of that history, so `pschaos check` re-judges a saved run the same way.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict

from .base import Verdict, by_f, unknown


def final_read(history: list[dict]) -> tuple[dict | None, str | None]:
    """The last final reading's keys, or None and why there is none."""
    reads = by_f(history, "final-read")
    if not reads:
        return None, "the history has no final-read: the run never read back what survived"
    v = reads[-1]["value"]
    if "error" in v:
        return None, f"the final read failed: {v['error']}"
    return v["keys"], None


def no_lost_updates(history: list[dict], ctx: dict) -> Verdict:
    """Every acknowledged update is among the ops the final primary holds for its key. Reports
    how many were lost and which (worker, op, when acknowledged and by which node)."""
    acked = [e for e in by_f(history, "update", "ok")]
    if not acked:
        return unknown("no update was acknowledged: there is nothing to lose, so nothing was tested")
    final, why = final_read(history)
    if final is None:
        return unknown(why, acked=len(acked))
    held = {k: set(v["ops"]) for k, v in final.items()}
    lost = [e for e in acked if e["value"]["op"] not in held.get(e["value"]["key"], set())]
    by_node = Counter(e["value"].get("node") for e in lost)
    return Verdict(not lost, {
        "acked": len(acked), "lost": len(lost), "lost_by_key": dict(Counter(e["value"]["key"] for e in lost)),
        "acked_by": dict(by_node),
        "lost_window_s": [round(lost[0]["t"], 3), round(lost[-1]["t"], 3)] if lost else None,
        "examples": [{"key": e["value"]["key"], "op": e["value"]["op"], "acked_at_s": round(e["t"], 3),
                      "acked_by": e["value"].get("node")} for e in lost[:20]]})


def counters_match(history: list[dict], ctx: dict) -> Verdict:
    """Each key's count is the number of ops it holds, its sum their amounts, and every op it
    holds was invoked (no update applied twice, none made up)."""
    final, why = final_read(history)
    if final is None:
        return unknown(why)
    if not final:
        return unknown("the final read holds no key: no update reached the system")
    amount = {(e["value"]["key"], e["value"]["op"]): e["value"]["amount"] for e in by_f(history, "update", "invoke")}
    bad = []
    for key, v in sorted(final.items()):
        ops = v["ops"]
        phantom = [op for op in ops if (key, op) not in amount]
        want = sum(amount.get((key, op), 0.0) for op in ops)
        if v["count"] != len(ops) or abs(v["sum"] - want) > 1e-6 * max(1.0, abs(want)) or phantom or \
                len(set(ops)) != len(ops):
            bad.append({"key": key, "count": v["count"], "ops": len(ops), "distinct_ops": len(set(ops)),
                        "sum": v["sum"], "sum_of_ops": round(want, 6), "never_invoked": phantom[:10]})
    return Verdict(not bad, {"keys": len(final), "mismatched": bad[:10]})


def linearizable_reads(history: list[dict], ctx: dict) -> Verdict:
    """Reads of one key against its increment-only count, in real time: a read returns at least
    the updates acknowledged before it began (no stale read), at most those invoked before it
    ended and not refused (no value from nowhere), and never less than a read that ended before
    it began. These are conditions every linearizable history meets, so a violation is a real
    one; the check does not claim the converse."""
    done = {e["op_id"]: e for e in by_f(history, "read", "ok")}
    reads = [(e["t"], done[e["op_id"]]["t"], e["value"]["key"], done[e["op_id"]]["value"]["value"])
             for e in by_f(history, "read", "invoke") if e.get("op_id") in done]
    if not reads:
        return unknown("no read completed: linearizability had nothing to judge")
    refused = {e["op_id"] for e in by_f(history, "update", "fail")}
    acked_at, invoked_at = defaultdict(list), defaultdict(list)
    for e in by_f(history, "update", "ok"):
        acked_at[e["value"]["key"]].append(e["t"])
    for e in by_f(history, "update", "invoke"):
        if e.get("op_id") not in refused:
            invoked_at[e["value"]["key"]].append(e["t"])
    for ts in (*acked_at.values(), *invoked_at.values()):
        ts.sort()
    stale, phantom, backwards = [], [], []
    by_key: dict[str, list] = defaultdict(list)
    for r in reads:
        by_key[r[2]].append(r)
    for key, rs in by_key.items():
        for t0, t1, _, v in rs:
            low, high = bisect_left(acked_at[key], t0), bisect_right(invoked_at[key], t1)
            if v < low:
                stale.append({"key": key, "read": v, "acked_before": low, "at_s": round(t0, 3)})
            elif v > high:
                phantom.append({"key": key, "read": v, "invoked_before_end": high, "at_s": round(t0, 3)})
        ends = sorted((t1, v) for _, t1, _, v in rs)
        best, prefix = -1, []
        for _, v in ends:
            best = max(best, v)
            prefix.append(best)
        end_ts = [t for t, _ in ends]
        for t0, _, _, v in rs:
            i = bisect_left(end_ts, t0)
            if i and prefix[i - 1] > v:
                backwards.append({"key": key, "read": v, "earlier_read": prefix[i - 1], "at_s": round(t0, 3)})
    return Verdict(not (stale or phantom or backwards), {
        "reads": len(reads), "stale": len(stale), "from_nowhere": len(phantom), "went_back": len(backwards),
        "examples": (stale + phantom + backwards)[:10]})
