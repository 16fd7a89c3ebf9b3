"""Checkers for an adapted system's updates and reads (harness/backends/adapters/workload.py).

An update is acknowledged (`ok`), refused (`fail`: surely not applied) or indeterminate (`info`:
it may have been applied). At the end the harness reads back, from the primary, each key's
applied op ids, its count and its float sum (`final-read`). These checkers are pure functions
of that history, so `pschaos check` re-judges a saved run the same way.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict

from pschaos.harness.checkers.base import KILLS, Verdict, by_f, unknown

# the failure kinds each check reports (details["kinds"]); a scenario's `expect.finds` accepts
# by default only those a system under test causes, not those that mean the harness or the
# adapter misclassified an operation (a refused update that was applied: `from_nowhere`)
FAILURE_KINDS = {"no-lost-updates": ("lost",), "counters-match": ("mismatch",),
                 "linearizable-reads": ("stale", "went_back", "final_below_read", "from_nowhere")}
SYSTEM_BUG_KINDS = {"no-lost-updates": ("lost",), "counters-match": ("mismatch",),
                    "linearizable-reads": ("stale", "went_back", "final_below_read")}
SAMPLE_ERRORS_MAX = 0.25      # more of the topology samples than this failed: the sampling says nothing
LEADER_FAULT_KINDS = (*KILLS, "stop", "pause", "partition")


def last_heal_t(history: list[dict]) -> float:
    """When the last fault healed (0 without faults): acks after it show the system served again."""
    return max((e["t"] for e in by_f(history, "fault-stop")), default=0.0)


def leader_faults_unanswered(history: list[dict]) -> list[str]:
    """Faults on the primary after which no sample saw a higher term: nothing shows that the
    system's control plane noticed (a new election), so a loss found may not be a failover's."""
    samples = [e for e in by_f(history, "topology") if e["value"].get("epoch") is not None]
    out = []
    for e in by_f(history, "fault-start"):
        v = e["value"]
        cut = v.get("isolated_primary") or {}          # a partition: the primary on the cut side
        if v.get("kind") in LEADER_FAULT_KINDS and (v.get("was_primary") or cut):
            epoch = cut.get("epoch", v.get("epoch", 0))
            if not any(s["t"] > e["t"] and s["value"]["epoch"] > epoch for s in samples):
                out.append(f"no sample after fault {v.get('index', '?')} ({v['kind']} {v['target']}) saw a term above "
                           f"{epoch}: no new primary was seen elected")
    return out


def evidence_gaps(history: list[dict], ctx: dict, check: str) -> tuple[list[str], list[str]]:
    """(reasons the run cannot judge `check`, notes that do not decide it). An adapted system
    that never settled, a partition that dropped nothing, a sampler that mostly failed leave no
    evidence; a fault on the primary with no new term seen decides only a scenario that
    `finds` a failure of this check (its finding would not be a failover's), else it is a note."""
    gaps, notes = [], []
    for e in by_f(history, "quiesce"):
        if e["value"].get("settled") is False:
            gaps.append(f"the system never settled within {e['value'].get('timeout_s')} s after the heals "
                        "(one primary, every replica caught up): the final read may be a passing state")
    for e in by_f(history, "fault-stop"):
        v = e["value"]
        if v.get("kind") in ("partition", "loss") and v.get("packets_dropped") == 0:
            gaps.append(f"fault {v.get('index', '?')} ({v['kind']} {v['target']}) dropped no packet: it did not bite")
    errors, samples = len(by_f(history, "sample-error")), len(by_f(history, "topology"))
    if errors and errors > SAMPLE_ERRORS_MAX * (errors + samples):
        gaps.append(f"{errors} of {errors + samples} topology samples failed (sample-error): who led when is unknown")
    unanswered = leader_faults_unanswered(history)
    finds = {f if isinstance(f, str) else next(iter(f)) for f in ctx.get("finds") or []}
    (gaps if check in finds else notes).extend(unanswered)
    return gaps, notes


def _gated(history: list[dict], ctx: dict, check: str, v: Verdict) -> Verdict:
    """`v` unless the run's evidence cannot carry it (then unknown, with what it would have said)."""
    gaps, notes = evidence_gaps(history, ctx, check)
    if notes:
        v.details["notes"] = notes
    if gaps and v.valid != "unknown":
        return unknown("; ".join(gaps), would_have_been=v.valid, **v.details)
    return v


def final_read(history: list[dict]) -> tuple[dict | None, str | None]:
    """The last final reading's keys, or None and why there is none."""
    reads = by_f(history, "final-read")
    if not reads:
        return None, "the history has no final-read: the run never read back what survived"
    v = reads[-1]["value"]
    if "error" in v:
        return None, f"the final read failed: {v['error']}"
    return v["keys"], None


def lost_updates(history: list[dict]) -> list[dict]:
    """Every acknowledged update the final read does not hold: key, op id, the node that
    acknowledged it and when (written whole to lost-updates.jsonl beside report.json)."""
    final, _ = final_read(history)
    if final is None:
        return []
    held = {k: set(v["ops"]) for k, v in final.items()}
    return [{"key": e["value"]["key"], "op": e["value"]["op"], "op_id": e.get("op_id"),
             "acked_by_node": e["value"].get("node"), "acked_at_s": round(e["t"], 3)}
            for e in by_f(history, "update", "ok") if e["value"]["op"] not in held.get(e["value"]["key"], set())]


LOST_FILE = "lost-updates.jsonl"


def no_lost_updates(history: list[dict], ctx: dict) -> Verdict:
    """Every acknowledged update is among the ops the final primary holds for its key. Reports
    how many were lost and which (every one in lost-updates.jsonl). Fails closed: the final read
    must hold some update acknowledged after the last heal, else it may be an empty or stale
    copy and a "loss" would be no finding."""
    acked = [e for e in by_f(history, "update", "ok")]
    if not acked:
        return unknown("no update was acknowledged: there is nothing to lose, so nothing was tested")
    final, why = final_read(history)
    if final is None:
        return unknown(why, acked=len(acked))
    held = {k: set(v["ops"]) for k, v in final.items()}
    healed = last_heal_t(history)
    after = [e for e in acked if e["t"] > healed]
    if not after:
        return unknown(f"no update was acknowledged after the last heal (t={healed:.3f} s): nothing shows the "
                       "system served again", acked=len(acked))
    if not any(e["value"]["op"] in held.get(e["value"]["key"], set()) for e in after):
        return unknown(f"the final read holds none of the {len(after)} updates acknowledged after the last heal: "
                       "it is an empty or stale copy, not what survived", acked=len(acked))
    lost = lost_updates(history)
    return _gated(history, ctx, "no-lost-updates", Verdict(not lost, {
        "acked": len(acked), "lost": len(lost), "lost_fraction": round(len(lost) / len(acked), 4),
        "kinds": ["lost"] if lost else [],
        "lost_by_key": dict(Counter(x["key"] for x in lost)),
        "lost_by_acking_node": dict(Counter(x["acked_by_node"] for x in lost)),
        "lost_window_s": [lost[0]["acked_at_s"], lost[-1]["acked_at_s"]] if lost else None,
        **({"all_lost": f"{LOST_FILE} beside report.json (key, op, op_id, acked_by_node, acked_at_s)"} if lost else {}),
        "examples": lost[:20]}))


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
    return _gated(history, ctx, "counters-match", Verdict(not bad, {"keys": len(final), "mismatched": bad[:10],
                                                                   "kinds": ["mismatch"] if bad else []}))


def linearizable_reads(history: list[dict], ctx: dict) -> Verdict:
    """Reads of one key against its increment-only count, in real time: a read returns at least
    the updates acknowledged before it began (no stale read), at most those invoked before it
    ended and not refused (no value from nowhere), and never less than a read that ended before
    it began. The final read counts as a read after every op: no key ends below a value a read
    returned (a read saw updates that were then lost). These are conditions every linearizable
    history meets, so a violation is a real one; the check does not claim the converse."""
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
    final, why = final_read(history)
    if final is None and not (stale or phantom or backwards):
        return unknown(f"{why}: reads cannot be held to the final state", reads=len(reads))
    below = []
    for key, rs in sorted(by_key.items()) if final is not None else ():
        top = max(rs, key=lambda r: r[3])
        count = final.get(key, {}).get("count", 0)
        if count < top[3]:
            below.append({"key": key, "final": count, "read": top[3], "at_s": round(top[0], 3)})
    found = {"stale": stale, "from_nowhere": phantom, "went_back": backwards, "final_below_read": below}
    return _gated(history, ctx, "linearizable-reads", Verdict(not any(found.values()), {
        "reads": len(reads), **{k: len(v) for k, v in found.items()}, "kinds": [k for k, v in found.items() if v],
        "examples": (stale + phantom + backwards + below)[:10]}))
