"""What workers read: deltas are complete and assemble the server's state, reads never go back
(the BSP/SSP staleness bound is judged with membership in barrier.py).

Reads are judged by the (epoch, seq) the server put in each reply, not by the cursor the client
keeps, so a client bug cannot hide a server one. pulled-copy-matches is the one check that holds
the client's own copy against the server's state: the client's cursor is what it judges.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right

from pschaos.harness.checkers.base import Verdict, by_f, op_key, unknown


def delta_complete(history: list[dict], ctx: dict) -> Verdict:
    """Every dense key an acked push changed after a pull's cursor (since, seq] is in that pull.

    Only pushes acked before the pull was invoked and at the pull's epoch are held against it:
    those are certainly in the state it read. Of a push acked before a migration's switch that came
    before the pull, the keys the switch moved to another shard are not.
    """
    invoked = {op_key(e): e["t"] for e in by_f(history, "pull", "invoke") if "op_id" in e}
    acks = sorted(((e["t"], e["value"]) for e in by_f(history, "push", "ok")), key=lambda a: a[0])
    # Index the acks by (shard, epoch), sorted by seq, so each pull looks only at the pushes in
    # its (since, seq] window: linear in the history, where a scan of every ack per pull was
    # quadratic (a 30 s soak spent most of its judging time here).
    malformed = [p for _, p in acks if not all(k in p for k in ("shard", "epoch", "seq"))]
    if malformed:
        return unknown("an acknowledged push without its shard, epoch or seq: cannot place it",
                       example=malformed[0])
    index: dict[tuple, tuple[list[int], list[int]]] = {}
    for i, (_, p) in sorted(enumerate(acks), key=lambda ia: ia[1][1]["seq"]):
        seqs, order = index.setdefault((p["shard"], p["epoch"]), ([], []))
        seqs.append(p["seq"])
        order.append(i)
    pulls = by_f(history, "pull", "ok")
    # a migration's switch moves keys to other shards: a pull after it no longer holds the keys
    # that moved, so those are not held against it (the rest of the push still is)
    switches, moved = _switches(history)
    missing, checked, across = [], 0, 0
    for e in pulls:
        v = e["value"]
        t_inv = invoked.get(op_key(e), e["t"])
        seqs, order = index.get((v["shard"], v["epoch"]), ((), ()))
        window = order[bisect_right(seqs, v["since"]):bisect_right(seqs, v["seq"])]
        keys = set(v["keys"])
        for i in sorted(window):
            t, p = acks[i]
            if t >= t_inv:
                break
            crossed = [moved[j] for j in range(bisect_right(switches, t), bisect_left(switches, t_inv))]
            if crossed:
                across += 1
            checked += 1
            lost = [k for k in p.get("keys", []) if "[" not in k and k not in keys and not any(m(k) for m in crossed)]
            if lost:
                missing.append({"pull": e.get("op_id"), "worker": v["worker"], "shard": v["shard"],
                                "since": v["since"], "seq": v["seq"], "push_seq": p["seq"], "keys": lost})
    if not checked:
        return unknown("no (pull, acked push) pair to check: no pull read past a push it must contain",
                       pulls=len(pulls), acks=len(acks), pairs_across_a_migration=across)
    return Verdict(not missing, {"pairs_checked": checked, "missing": missing[:10], "missing_count": len(missing),
                                 "pairs_across_a_migration": across})


def _switches(history: list[dict]) -> tuple[list[float], list]:
    """The times of the migrations' switches, in order, and for each a test of whether it moved a
    key (its owner under the migration's source shards differs from its owner under the new ones)."""
    from pschaos.psnodes.placement import owner, pinned_shard

    starts = {e["value"]["migration"]: e["value"] for e in by_f(history, "migration-start")}
    out = []
    for e in sorted(by_f(history, "migration-switch"), key=lambda e: e["t"]):
        st = starts.get(e["value"].get("migration"))
        if st is None:           # the switch's shard sets are unknown: any key may have moved
            out.append((e["t"], lambda k: True))
            continue
        src, dst = tuple(st["src"]), tuple(st["dst"])
        out.append((e["t"], lambda k, s=src, d=dst: pinned_shard(k) is None and owner(k, s) != owner(k, d)))
    return [t for t, _ in out], [m for _, m in out]


def pulled_copy_matches(history: list[dict], ctx: dict) -> Verdict:
    """After every delta pull, the worker's assembled copy of the shard equals the server's state at
    the reply's version: the two CRC-32s the pull recorded (state_crc from the server, copy_crc of
    the client's copy after the delta; pschaos.psnodes.store.digest) are equal.

    This judges the outcome, not the cursor: a cursor carried across an epoch change is fine when
    the new epoch's history holds the state it names (the same node re-elected, or sync mode,
    where reads wait for replication), and wrong when a failover lost what the worker had read.
    Pulls without the digests (a full pull, or a history from before they were recorded) are not
    judged; when no pull carried them there is no evidence: unknown.
    """
    pulls = by_f(history, "pull", "ok")
    if not pulls:
        return unknown("no pull was answered: no read to judge")
    last: dict[tuple, tuple] = {}
    judged, bad, torn = 0, [], []
    for e in pulls:
        v = e["value"]
        key = (v.get("worker"), v.get("shard"))
        before, last[key] = last.get(key), (v.get("epoch"), v.get("seq"))
        have = [k for k in ("state_crc", "copy_crc") if k in v]
        if not have:
            continue
        if len(have) == 1 or not all(isinstance(v[k], int) for k in have):
            torn.append(e)
            continue
        judged += 1
        if v["state_crc"] != v["copy_crc"]:
            bad.append({"pull": e.get("op_id"), "t": round(e["t"], 4), "worker": v.get("worker"),
                        "shard": v.get("shard"), "node": v.get("node"), "epoch": v.get("epoch"),
                        "since": v.get("since"), "seq": v.get("seq"), "keys": len(v.get("keys", [])),
                        "previous_read": list(before) if before else None,
                        "state_crc": v["state_crc"], "copy_crc": v["copy_crc"]})
    if torn and not bad:
        return unknown("a pull records one state digest without the other, or one that is not an "
                       "integer: cannot compare", example=torn[0], count=len(torn))
    if not judged:
        return unknown("no pull carried the state digests (state_crc, copy_crc): no delta pull, or a "
                       "history recorded before psnodes sent them", pulls=len(pulls))
    return Verdict(not bad, {"pulls_judged": judged, "pulls": len(pulls), "mismatches": bad[:10],
                             "mismatch_count": len(bad), "torn": len(torn)})


def _undone(pulls: list[tuple[float, dict]], promotes: list[tuple[float, dict]],
            restored: set[tuple[int, int]]) -> list[dict]:
    """Reads at epoch e of a seq that the next epoch's primary did not have when it was promoted:
    state a failover undid, so no acknowledged history contains what the worker saw. An epoch
    that began with a reported restore from checkpoint (a loss losses-accounted judges) is marked."""
    out = []
    for t, v in pulls:
        nxt = [p for tp, p in promotes if p["shard"] == v["shard"] and p["epoch"] > v["epoch"]]
        if not nxt:
            continue
        p = min(nxt, key=lambda p: p["epoch"])
        if "seq" in p and v["seq"] > p["seq"]:
            out.append({"worker": v["worker"], "shard": v["shard"], "epoch": v["epoch"], "seq": v["seq"],
                        "t": round(t, 4), "next_epoch": p["epoch"], "next_epoch_started_at_seq": p["seq"],
                        "restored": (p["shard"], p["epoch"]) in restored})
    return out


def monotone_reads(history: list[dict], ctx: dict) -> Verdict:
    """Per worker and shard, each pull reads a state at least as new as the one before: the epoch
    never goes back, nor the seq within an epoch (dense pulls: a worker's row pulls run beside
    them, so their replies' order is not its reads' order). A read of state that a failover later
    undid is reported, a row read's (`pull-rows`) too; in sync mode (reads wait for replication)
    it fails the check."""
    pulls = [(e["t"], e["value"]) for e in by_f(history, "pull", "ok")]
    if not pulls:
        return unknown("no pull was answered: no read to judge")
    last: dict[tuple, tuple] = {}
    back = []
    for t, v in pulls:
        k = (v["worker"], v["shard"])
        cur = (v["epoch"], v["seq"])
        if k in last and cur < last[k]:
            back.append({"worker": v["worker"], "shard": v["shard"], "epoch": v["epoch"], "seq": v["seq"],
                         "before": list(last[k]), "t": round(t, 4)})
        last[k] = max(cur, last.get(k, cur))
    restored = {(e["value"]["shard"], e["value"].get("epoch")) for e in by_f(history, "restore")}
    rows = [(e["t"], e["value"]) for e in by_f(history, "pull-rows", "ok")]     # row reads: undone ones too
    undone = _undone(sorted(pulls + rows, key=lambda p: p[0]), [(e["t"], e["value"]) for e in by_f(history, "promote")],
                     restored)
    sync = ctx.get("replication", "sync") == "sync"
    unexcused = [u for u in undone if not u["restored"]]
    return Verdict(not back and not (sync and unexcused), {
        "regressions": back[:10], "count": len(back), "pulls": len(pulls),
        "undone_reads": undone[:10], "undone_count": len(undone),
        "undone_fails": sync})
