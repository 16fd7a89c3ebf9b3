"""One acking primary per shard, over time, not only per epoch.

Keying by (shard, epoch) misses the worst split brain: two nodes acking at the same wall time
under different epochs (an old primary cut off from etcd and a restored one). So the checker
holds every ack to the promotions and acks around it in time:
- at most one node acks for a shard at one epoch, and epochs only rise;
- no node acks at epoch e a push that was sent after a higher epoch of that shard was promoted
  or had acked (the request did not exist yet when the old epoch was over);
- no two (node, epoch) primaries of a shard alternate: A acks, then B acks a later request,
  then A acks a request sent after B's ack.
Times are the history's: an ack's request was sent at its invoke, answered by its ok.
"""
from __future__ import annotations

from collections import defaultdict

from pschaos.harness.checkers.base import Verdict, by_f, op_key, unknown


def _acks(history: list[dict]) -> list[dict]:
    """Acked pushes with the time they were sent (`t0`) and answered (`t1`)."""
    sent = {op_key(e): e["t"] for e in by_f(history, "push", "invoke") if "op_id" in e}
    out = []
    for e in by_f(history, "push", "ok"):
        v = e["value"]
        if v.get("duplicate"):
            continue       # a retry answered from the applied set proves nothing about who acks now
        out.append({"shard": v["shard"], "epoch": v["epoch"], "node": v["node"], "seq": v.get("seq"),
                    "t0": sent.get(op_key(e), e["t"]), "t1": e["t"]})
    return out


def _late_acks(acks: list[dict], promotes: list[tuple[float, dict]]) -> list[dict]:
    """Acks at epoch e of requests sent after a higher epoch was promoted or acked."""
    marks: dict[int, list[tuple[int, float, str]]] = defaultdict(list)   # shard -> (epoch, t, why)
    for t, p in promotes:
        marks[p["shard"]].append((p["epoch"], t, f"promote of {p['node']}"))
    for a in acks:
        marks[a["shard"]].append((a["epoch"], a["t1"], f"ack by {a['node']}"))
    # per shard and epoch e: the earliest moment any epoch above e was in force
    first_above: dict[tuple[int, int], tuple[float, int, str]] = {}
    for shard, ms in marks.items():
        best: tuple[float, int, str] | None = None
        for epoch in sorted({m[0] for m in ms}, reverse=True):
            if best is not None:
                first_above[(shard, epoch)] = best
            here = min((t, ep, why) for ep, t, why in ms if ep == epoch)
            best = here if best is None or here < best else best
    late = []
    for a in acks:
        hit = first_above.get((a["shard"], a["epoch"]))
        if hit and hit[0] < a["t0"]:
            late.append({"shard": a["shard"], "node": a["node"], "epoch": a["epoch"], "seq": a["seq"],
                         "sent_t": round(a["t0"], 4), "newer_epoch": hit[1], "newer_t": round(hit[0], 4),
                         "newer": hit[2]})
    return late


def _alternations(acks: list[dict]) -> list[dict]:
    """A -> B -> A among the (node, epoch) primaries of one shard, each step a later request."""
    out = []
    by_shard: dict[int, list[dict]] = defaultdict(list)
    for a in acks:
        by_shard[a["shard"]].append(a)
    for shard, xs in by_shard.items():
        ids = sorted({(a["node"], a["epoch"]) for a in xs})
        if len(ids) < 2:
            continue
        first_ok = {i: min(a["t1"] for a in xs if (a["node"], a["epoch"]) == i) for i in ids}
        last_sent = {i: max(a["t0"] for a in xs if (a["node"], a["epoch"]) == i) for i in ids}
        for a in ids:
            for b in ids:
                if a == b:
                    continue
                # A acked before B's first ack, and A acked again a request sent after B's first ack
                a_before = any((x["node"], x["epoch"]) == a and x["t1"] < first_ok[b] for x in xs)
                if a_before and last_sent[a] > first_ok[b]:
                    out.append({"shard": shard, "a": list(a), "b": list(b), "b_first_ack_t": round(first_ok[b], 4),
                                "a_last_sent_t": round(last_sent[a], 4)})
    return out


def single_primary(history: list[dict], ctx: dict) -> Verdict:
    """One acking primary per shard over time: at one epoch one node acks, epochs only rise, no old
    epoch acks a request sent after a newer one took over, and no two primaries alternate."""
    promotes = [(e["t"], e["value"]) for e in by_f(history, "promote")]
    acks = _acks(history)
    if not promotes and not acks:
        return unknown("no promotion and no acknowledged push in the history")
    nodes: dict[tuple[int, int], set[str]] = defaultdict(set)
    last_epoch: dict[int, int] = {}
    regressions = []
    for t, v in promotes:
        nodes[(v["shard"], v["epoch"])].add(v["node"])
        if v["epoch"] <= last_epoch.get(v["shard"], 0):
            regressions.append({"shard": v["shard"], "epoch": v["epoch"], "after": last_epoch[v["shard"]], "t": t})
        last_epoch[v["shard"]] = max(v["epoch"], last_epoch.get(v["shard"], 0))
    for a in acks:
        nodes[(a["shard"], a["epoch"])].add(a["node"])
    split = {f"shard {s} epoch {ep}": sorted(n) for (s, ep), n in nodes.items() if len(n) > 1}
    late = _late_acks(acks, promotes)
    alternating = [x for x in _alternations(acks)
                   if not any(l["shard"] == x["shard"] for l in late)] if acks else []
    return Verdict(not split and not regressions and not late and not alternating, {
        "epochs": {str(s): max(ep for (sh, ep) in nodes if sh == s) for s in {k[0] for k in nodes}},
        "split_brain": split, "epoch_regressions": regressions, "acks_after_newer_epoch": late[:10],
        "late_count": len(late), "alternating_primaries": alternating[:10], "acks_checked": len(acks)})
