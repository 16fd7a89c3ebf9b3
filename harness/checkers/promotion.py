"""best-promoted: every failover promoted the most up-to-date candidate it saw.

With replicas that never lag, an election that picks a lower slot over a copy holding more
entries costs nothing visible, and in async mode the loss it causes hides inside the max_lag
allowance. So each winner records its window (psnodes/core/promotion.py elected_event: its own
(epoch of its last entry, seq) and every ISR candidate's posting it saw), and the check holds the
winner to the best of them by the same order psnodes elects by. The postings are the copies' own:
each candidate wrote its position to etcd before the winner read it.

The winner's view is held to the copies' own word as well: each candidate says what it posted
(`candidate`, emitted once its put returned), and a posting whose put returned before the
winner's own did is one the winner's later reads cannot have missed (etcd reads are
linearizable): missed, or seen at an older position, it fails. A winner that filtered out a
better copy, or read a stale view, no longer passes on its own account alone (review of issue
32, finding 2).

Fail closed: a failover (a promote that is not a life's first and not a restore) with no
`elected` record of its epoch is unknown, never a pass; so is one whose winner left no
`candidate` record while other copies did (a history from before these records has none at
all: its views are taken as recorded, and the details say so).
"""
from __future__ import annotations

from pschaos.psnodes.core import promotion
from pschaos.psnodes.core.promotion import Position

from pschaos.harness.checkers.base import Verdict, by_f, unknown


FRESH_S = 0.5     # a posting this recent when the winner posted was still in etcd for its reads


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
    it saw, and saw every posting that returned before its own as it was posted (each copy's
    `candidate` record); a failover without its election record is unknown."""
    elected = best_candidates(history)
    restored = {(e["value"]["shard"], e["value"].get("epoch")) for e in by_f(history, "restore")}
    failovers = [e["value"] for e in by_f(history, "promote")
                 if e["value"].get("epoch", 1) > 1 and not e["value"].get("bootstrap")
                 and (e["value"].get("shard"), e["value"].get("epoch")) not in restored]
    posts: dict[tuple[int, int], list[tuple[float, dict]]] = {}
    for e in by_f(history, "candidate"):
        posts.setdefault((e["value"].get("shard"), e["value"].get("epoch")), []).append((e["t"], e["value"]))
    worse, unrecorded, missed = [], [], []
    for p in failovers:
        rec = elected.get((p["shard"], p["epoch"]))
        if rec is None or rec.get("node") != p.get("node"):
            unrecorded.append({"shard": p["shard"], "epoch": p["epoch"], "node": p.get("node")})
            continue
        if posts:
            gap = _view_gaps(rec, posts.get((p["shard"], p["epoch"] - 1), []))
            if gap is None:
                unrecorded.append({"shard": p["shard"], "epoch": p["epoch"], "node": p.get("node"),
                                   "why": "the winner left no candidate record"})
                continue
            missed += gap
        if [rec["seq_epoch"], rec["seq"]] < rec["best"]:
            worse.append({"shard": p["shard"], "epoch": p["epoch"], "promoted": p["node"],
                          "at": [rec["seq_epoch"], rec["seq"]], "best": rec["best"], "best_nodes": rec["best_nodes"],
                          "candidates": rec["candidates"]})
    details = {"failovers": len(failovers), "judged": len(failovers) - len(unrecorded), "worse": worse[:10],
               "missed_postings": missed[:10], "unrecorded": unrecorded[:10],
               "views_cross_checked": bool(posts)}
    if worse or missed:
        return Verdict(False, details)
    if unrecorded:
        return unknown(f"{len(unrecorded)} failover(s) left no election record: whether the best copy won is "
                       "unknown", **details)
    if not failovers:
        why = (f"no failover elected a new primary ({len(restored)} restore(s) replaced one: losses-accounted and "
               "checkpoint-loads judge those)" if restored else "no failover elected a new primary")
        return unknown(f"{why}: there was no choice to judge", **details)
    return Verdict(True, details)


def _view_gaps(rec: dict, posts: list[tuple[float, dict]]) -> list[dict] | None:
    """The postings that would have won which the winner's view lacks or shows older than posted:
    each candidate's latest
    posting that returned before the winner's own (the last one it made before it won), from a
    copy its filter keeps (the record's ISR, never the old primary), and recent enough that its
    key still lived (`FRESH_S`: a copy killed after posting keeps its key until its lease runs
    out, at least 5/6 of a TTL of 1 s or more later). None: the winner left no posting of its
    own."""
    mine = [(t, v) for t, v in posts if v.get("node") == rec.get("node")]
    if not mine:
        return None
    t_me, me = max(mine, key=lambda tv: tv[0])
    isr, old = set(me.get("isr") or ()), me.get("primary")
    latest: dict[str, dict] = {}
    for t, v in sorted(posts, key=lambda tv: tv[0]):
        if t_me - FRESH_S < t < t_me and v.get("node") != rec["node"] and v.get("node") in isr and v.get("node") != old:
            latest[v["node"]] = v
    seen = rec.get("candidates") or {}
    won = promotion.rank(rec["node"], Position(int(rec.get("seq_epoch", 0)), int(rec.get("seq", 0))))
    out = []
    for n, v in sorted(latest.items()):
        posted = [v.get("seq_epoch"), v.get("seq")]
        # only a posting that would have won matters: a lower one missed (its key gone with a
        # lease that ran out, an etcd restart) changed nothing
        if (n not in seen or list(seen[n]) < posted) and promotion.rank(n, Position(*map(int, posted))) > won:
            out.append({"shard": rec.get("shard"), "epoch": rec.get("epoch"), "winner": rec.get("node"),
                        "candidate": n, "posted": posted, "seen": seen.get(n)})
    return out

