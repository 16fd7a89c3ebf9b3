"""best-promoted: every failover promoted the most up-to-date candidate it saw.

With replicas that never lag, an election that picks a lower slot over a copy holding more
entries costs nothing visible, and in async mode the loss it causes hides inside the max_lag
allowance. So each winner records its window (psnodes/core/promotion.py elected_event: its own
(epoch of its last entry, seq) and every ISR candidate's posting it saw), and the check holds the
winner to the best of them by the same order psnodes elects by. The postings are the copies' own:
each candidate wrote its position to etcd before the winner read it.

Fail closed: a failover (a promote that is not a life's first and not a restore) with no
`elected` record of its epoch is unknown, never a pass.
"""
from __future__ import annotations

from pschaos.harness.checkers.base import Verdict, by_f, unknown


def best_candidates(history: list[dict]) -> dict[tuple[int, int], dict]:
    """(shard, epoch) -> the elected record with `best`: the most up-to-date position it saw."""
    out = {}
    for e in by_f(history, "elected"):
        v = e["value"]
        cands = {n: tuple(p) for n, p in (v.get("candidates") or {}).items()}
        if cands:
            top = max(cands.values())
            out[(v["shard"], v["epoch"])] = {**v, "best": list(top),
                                             "best_nodes": sorted(n for n, p in cands.items() if p == top)}
    return out


def best_promoted(history: list[dict], ctx: dict) -> Verdict:
    """Each failover's winner held the newest (epoch of its last entry, seq) among the candidates
    it saw; a failover without its election record is unknown."""
    elected = best_candidates(history)
    restored = {(e["value"]["shard"], e["value"].get("epoch")) for e in by_f(history, "restore")}
    failovers = [e["value"] for e in by_f(history, "promote")
                 if e["value"].get("epoch", 1) > 1 and not e["value"].get("bootstrap")
                 and (e["value"].get("shard"), e["value"].get("epoch")) not in restored]
    worse, unrecorded = [], []
    for p in failovers:
        rec = elected.get((p["shard"], p["epoch"]))
        if rec is None or rec.get("node") != p.get("node"):
            unrecorded.append({"shard": p["shard"], "epoch": p["epoch"], "node": p.get("node")})
            continue
        if [rec["seq_epoch"], rec["seq"]] < rec["best"]:
            worse.append({"shard": p["shard"], "epoch": p["epoch"], "promoted": p["node"],
                          "at": [rec["seq_epoch"], rec["seq"]], "best": rec["best"], "best_nodes": rec["best_nodes"],
                          "candidates": rec["candidates"]})
    details = {"failovers": len(failovers), "judged": len(failovers) - len(unrecorded), "worse": worse[:10],
               "unrecorded": unrecorded[:10]}
    if worse:
        return Verdict(False, details)
    if unrecorded:
        return unknown(f"{len(unrecorded)} failover(s) left no election record: whether the best copy won is "
                       "unknown", **details)
    if not failovers:
        why = (f"no failover elected a new primary ({len(restored)} restore(s) replaced one: losses-accounted and "
               "checkpoint-loads judge those)" if restored else "no failover elected a new primary")
        return unknown(f"{why}: there was no choice to judge", **details)
    return Verdict(True, details)
