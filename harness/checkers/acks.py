"""No acknowledged update lost; every update applied exactly once.

Two kinds of evidence, held against each other. The PS's own bookkeeping (the applied set of
idempotency keys each copy reports) says *which* keys landed; the audit tensor (every push adds
exactly +1 to its worker's slot, plain SGD with lr 1) says *how many* pushes each copy really
applied to its parameters, without trusting that bookkeeping. A PS that records a key but drops
the value passes the first and fails the second.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from pschaos.harness.checkers.base import KILLS, Verdict, by_f, final_states, idem, unknown, victims
from pschaos.harness.checkers.promotion import best_candidates
from pschaos.harness.checkers.migration import (applied_anywhere, bucket_excess, bucket_shortfalls, fq, identity,
                                               retired_copies)


def _contains(ranges: list[list[int]], x: int) -> bool:
    return any(lo <= x <= hi for lo, hi in ranges)


def _ranges(state: dict, v: dict) -> list[list[int]]:
    """The copy's applied ranges for the push's key (histories before incarnations keyed by worker)."""
    applied = state.get("applied") or {}
    return applied.get(idem(v), applied.get(v["worker"], []))


def _with_pid(e: dict) -> dict:
    """The push's value, with the pid of the process that wrote it: the harness's own way to tell
    two incarnations of a worker apart, should the client's incarnation number be wrong."""
    return {**e["value"], "pid": e.get("pid")}


def acked(history: list[dict]) -> list[dict]:
    return [_with_pid(e) for e in by_f(history, "push", "ok")]


def audited(v: dict) -> bool:
    """The push carried its +1 for the shard's audit tensor (a worker without a slot does not)."""
    return f"__audit__/{v['shard']}" in v.get("keys", ())


def credited(v: dict) -> dict:
    """The ack as the pinned audit tensors count it: a duplicate that a shard recognised from a
    migrated applied set (`applied_on`) was applied, and counted, by that shard under its own key."""
    if "applied_on" not in v:
        return v
    out = {**v, "shard": v["applied_on"]}
    if out.get("origin") == out["shard"] and not out.get("part"):
        out.pop("origin")
    return out


def applied_keys(copy: dict, worker: str) -> int:
    """How many keys of `worker` (all its incarnations) a copy's applied set claims."""
    return sum(hi - lo + 1 for k, rs in (copy.get("applied") or {}).items()
               if k.split("#")[0] == worker for lo, hi in rs)


def live_copies(history: list[dict]) -> dict[int, list[dict]]:
    """Each shard's copies alive at the end; a shard a scale-in retired, as it was when stopped."""
    out: dict[int, list[dict]] = defaultdict(list)
    for s in final_states(history):
        if s.get("alive"):
            out[s["shard"]].append(s)
    for shard, cs in retired_copies(history).items():
        if shard not in out:
            out[shard] = cs
    return out


def final_primaries(history: list[dict]) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for shard, copies in live_copies(history).items():
        prim = [c for c in copies if c.get("role") == "primary"]
        if prim:
            out[shard] = max(prim, key=lambda c: c["epoch"])
    return out


def unique_keys(values: list[dict]) -> dict[tuple[int, str], set]:
    """(shard, worker) -> the distinct pushes among these values: (key, process, request id)."""
    out: dict[tuple[int, str], set] = defaultdict(set)
    for v in values:
        out[(v["shard"], v["worker"])].add((idem(v), v.get("pid"), v["req_id"]))
    return out


def _explained(v: dict, promotes: list[dict], max_lag: int, best: dict | None = None) -> dict | None:
    """Async mode: the promotion whose unreplicated window the lost ack fell into, if any. Where the
    election recorded its candidates (`best`: (shard, epoch) -> the newest position seen), the
    window starts at the best surviving candidate's seq, not the winner's: an ack a better
    candidate held was lost by the election, not by replication."""
    for p in promotes:
        floor = p.get("seq", 0)
        rec = (best or {}).get((p["shard"], p["epoch"]))
        if rec is not None and rec.get("node") == p.get("node"):
            floor = max(floor, rec["best"][1])
        # the primary applies at seq+1 once replicas are within max_lag of seq: a lag of max_lag + 1
        if p["shard"] == v["shard"] and p["epoch"] > v["epoch"] and floor < v["seq"] \
                and v["seq"] - p.get("seq", 0) <= max_lag + 1:
            return p
    return None


def _isr_history(history: list[dict]) -> dict[tuple[int, int], list[tuple[float, list[str]]]]:
    """(shard, epoch) -> [(t, ISR)] as the primary recorded it: at its promotion, then each change."""
    out: dict[tuple[int, int], list[tuple[float, list[str]]]] = defaultdict(list)
    for e in history:
        v = e.get("value")
        if e.get("f") in ("promote", "isr") and isinstance(v, dict) and isinstance(v.get("isr"), list):
            out[(v.get("shard"), v.get("epoch"))].append((e["t"], list(v["isr"])))
    return out


def _restored(v: dict, t_sent: float, t_ack: float, restores: list[tuple[float, dict]], isr: dict,
              kills: list[tuple[float, set]]) -> dict | None:
    """Sync mode: the restore whose declared loss the lost ack falls in, when the loss is the
    design's: a restore comes only when no ISR copy survived, and it declares that the state after
    `restored_seq` is gone (losses-accounted holds that against the best checkpoint). Allowed only
    with the evidence that every copy that may have been in the ISR while the push was applied
    (the ISR of record when it was sent, and every one until its ack came back) was killed (lost
    its memory) between the push's send and the restore; otherwise a copy that held the ack lived
    on, and the restore lost it wrongly. From the send, not the ack's arrival: a primary killed
    with the ack on the wire was killed after it applied the push (all-copies-lost: the ack of
    seq 301 arrived after its primary's kill and was not excused)."""
    for t_r, r in restores:
        if r.get("shard") != v["shard"] or r.get("epoch", 0) <= v["epoch"] or t_r < t_ack or \
                r.get("restored_seq") is None or v["seq"] <= r["restored_seq"]:
            continue
        line = isr.get((v["shard"], v["epoch"]), [])
        at_send = [members for t, members in line if t <= t_sent][-1:]
        held = set().union(*at_send, *(members for t, members in line if t_sent < t <= t_ack))
        if at_send and all(any(t_sent <= t <= t_r and m in victims for t, victims in kills) for m in held):
            return r
    return None


def no_lost_acks(history: list[dict], ctx: dict) -> Verdict:
    """Every push a client saw acknowledged is on every live copy at the end: its key is in the
    final primary's applied set, and each copy's audit count for the worker covers it.

    Sync mode allows none lost but those a restore declared (every copy of the shard went down
    at once, and the restore says from which seq on the state is gone: losses-accounted judges
    the declaration). Async mode allows exactly the acks that fell in a failover's unreplicated
    window (seq above the new primary's seq at promotion, at most `max_lag` above): the
    replication lag the history shows at that fault, per shard, never a pooled allowance.
    """
    oks = acked(history)
    if not oks:
        return unknown("no push was acknowledged: there is nothing to lose, so nothing was tested")
    prim = final_primaries(history)
    copies = live_copies(history)
    shards = sorted({v["shard"] for v in oks})
    missing = [s for s in shards if s not in prim]
    if missing:
        return unknown(f"no live primary at the end for shards {missing}")
    mode, max_lag = ctx.get("replication", "sync"), ctx.get("max_lag", 256)
    promotes = [e["value"] for e in by_f(history, "promote")]
    restores = [(e["t"], e["value"]) for e in by_f(history, "restore")]
    isr = _isr_history(history) if restores else {}
    kills = [(e["t"], set(victims(e["value"]))) for e in by_f(history, "fault-start")
             if e["value"].get("kind") in KILLS and not e["value"].get("partial")] if restores else []
    sent = {e.get("op_id"): e["t"] for e in by_f(history, "push", "invoke")} if restores else {}
    t_acked = {id(v): (sent.get(e.get("op_id"), e["t"]), e["t"])        # acked() keeps their order
               for v, e in zip(oks, by_f(history, "push", "ok"))}
    best = best_candidates(history) if mode == "async" else {}
    keys = unique_keys([credited(v) for v in oks if audited(v)])
    unaudited = sum(1 for v in oks if not audited(v))
    lost, explained, unexplained = [], Counter(), []
    seen = set()
    anywhere = applied_anywhere(history) if any("applied_on" in v for v in oks) else {}
    for v in oks:
        k = (v["shard"], idem(v), v.get("pid"), v["req_id"])
        # a duplicate the shard knew from a migrated applied set was applied by the shard named
        ranges = anywhere.get(fq(v), []) if "applied_on" in v else _ranges(prim[v["shard"]], v)
        if k in seen or _contains(ranges, v["req_id"]):
            seen.add(k)
            continue
        seen.add(k)
        lost.append(v)
        p = _explained(v, promotes, max_lag, best) if mode == "async" else \
            _restored(v, *t_acked.get(id(v), (0.0, 0.0)), restores, isr, kills)
        if p is not None:
            explained[(v["shard"], v["worker"])] += 1
        else:
            unexplained.append(v)
    short, no_audit, lagging = [], [], set()
    lost_by: Counter = Counter((v["shard"], v["worker"]) for v in lost)
    for (shard, worker), ks in sorted(keys.items()):
        for c in copies.get(shard, []):
            if c["seq"] < prim[shard]["seq"]:
                lagging.add(c["node"])     # still catching up: replicas-match judges it, not this check
                continue
            if c.get("audit") is None:
                no_audit.append(c["node"])
                continue
            have = int(c["audit"].get(worker, 0))
            # at least every ack it must hold, and every key its own applied set claims for the worker
            need = max(len(ks) - min(explained[(shard, worker)], len(ks)), applied_keys(c, worker))
            lost_by[(shard, worker)] = max(lost_by[(shard, worker)], len(ks) - have)
            if have < need:
                short.append({"shard": shard, "node": c["node"], "worker": worker, "acked": len(ks),
                              "applied_keys": applied_keys(c, worker), "audit": have,
                              "allowed_lost": explained[(shard, worker)]})
    details = {"acked": len(oks), "acked_keys": sum(len(k) for k in keys.values()),
               "lost": sum(max(0, n) for n in lost_by.values()), "lost_keys": len(lost),
               "allowed": sum(explained.values()), "mode": mode, "audit_short": short[:10],
               **({"declared_by_restore": sum(explained.values())} if mode != "async" else {}),
               "examples": [{k: v.get(k) for k in ("worker", "incarnation", "req_id", "shard", "epoch", "seq")}
                            for v in unexplained[:10]]}
    details["unaudited_acks"] = unaudited
    details["lagging_copies"] = sorted(lagging)
    # an async failover's explained losses (a restore's declared ones) took their bucket increments with them
    allowed_ids = {identity(v) for v in lost if v not in unexplained}
    bshort, bfig, bwhy = bucket_shortfalls(history, allowed_ids)
    details.update(bfig, bucket_short=bshort[:10])
    short += bshort
    worst_by_worker: Counter = Counter()
    for b in bshort:
        worst_by_worker[b["worker"]] = max(worst_by_worker[b["worker"]], b["acked"] - b["count"])
    details["lost"] = max(details["lost"], sum(worst_by_worker.values()))
    if bwhy and not unexplained and not short:
        return unknown(f"{bwhy}: the moved keys' values were not checked", **details)
    if (no_audit or unaudited) and not unexplained and not short:
        why = f"copies {sorted(set(no_audit))} report no audit tensor" if no_audit else \
            f"{unaudited} acknowledged pushes carried no audit increment"
        return unknown(f"{why}: the values were not checked", **details)
    return Verdict(not unexplained and not short, details)


def exactly_once(history: list[dict], ctx: dict) -> Verdict:
    """No push applied twice: at most one non-duplicate ack per key; every copy's audit count per
    worker is at most the pushes that worker invoked and equals the keys its applied set holds;
    the copy's push counter equals its applied keys; and every migrating audit bucket's final
    count per worker is at most the logical pushes that carried it (migration.bucket_excess:
    a push applied at a migration's source and again at its new owner counts twice there)."""
    oks = acked(history)
    if not oks:
        return unknown("no push was acknowledged: exactly-once had nothing to judge")
    applied_by: dict[tuple, list] = defaultdict(list)
    for v in oks:
        if not v.get("duplicate"):
            applied_by[(v["shard"], idem(v), v.get("pid"), v["req_id"])].append(v["seq"])
    twice = {k: s for k, s in applied_by.items() if len(set(s)) > 1}
    invoked = unique_keys([_with_pid(e) for e in by_f(history, "push", "invoke")])
    over, disagree, mismatched, no_audit = [], [], [], []
    copies = live_copies(history)
    unseen = sorted({v["shard"] for v in oks} - {s for s, cs in copies.items() if any(c.get("audit") is not None
                                                                                     for c in cs)})
    for shard, cs in copies.items():
        for c in cs:
            n_keys = sum(hi - lo + 1 for rs in (c.get("applied") or {}).values() for lo, hi in rs)
            if n_keys != c.get("pushes"):
                mismatched.append({"node": c["node"], "pushes": c.get("pushes"), "keys": n_keys})
            if c.get("audit") is None:
                no_audit.append(c["node"])
                continue
            for worker, count in c["audit"].items():
                sent = len(invoked.get((shard, worker), ()))
                if int(count) > sent:
                    over.append({"node": c["node"], "worker": worker, "audit": int(count), "invoked": sent})
                keys = applied_keys(c, worker)
                if int(count) != keys:
                    disagree.append({"node": c["node"], "worker": worker, "audit": int(count), "applied_keys": keys})
    reinvoked = len(by_f(history, "push", "invoke")) - sum(len(k) for k in invoked.values())
    bucket_over, bucket_figures = bucket_excess(history)     # through migrations: applied <= invoked
    details = {"applied_twice": [list(k) + [s] for k, s in list(twice.items())[:10]],
               "bucket_over_invoked": bucket_over[:10], **bucket_figures,
               "audit_over_invoked": over[:10], "audit_vs_applied_keys": disagree[:10],
               "count_mismatch": mismatched[:10],
               "duplicate_acks": sum(1 for v in oks if v.get("duplicate")), "reinvoked": reinvoked}
    bad = bool(twice or over or disagree or mismatched or bucket_over)
    if bucket_figures.get("excess_unjudged") and not bad:
        return unknown(bucket_figures["excess_unjudged"] + ": excess through migrations was not judged", **details)
    if unseen and not bad:
        return unknown(f"shards {unseen} had acks but no live copy reported an audit tensor", **details)
    if no_audit and not bad:
        return unknown(f"copies {sorted(set(no_audit))} report no audit tensor: the values were not checked",
                       **details)
    return Verdict(not bad, details)
