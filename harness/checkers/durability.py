"""Checkpoints are atomic; losses from restores are accounted for; a cut-off primary stops acking;
the faulted run converges like a fault-free one."""
from __future__ import annotations

from pschaos.harness.checkers.base import Verdict, by_f, final_states, idem, unknown
# how a shard's checkpoints compare: the writer's term, the epoch of its last entry, its seq
from pschaos.psnodes.core.checkpoints import order as checkpoint_order

RACE_S = 0.5    # see _older_restores


def checkpoints_atomic(history: list[dict], ctx: dict) -> Verdict:
    """Every manifest names a whole, loadable checkpoint (a torn .tmp beside it is fine). A copy's
    own folder that a bit-rot damaged is not held to it from the rot until the copy publishes its
    next checkpoint there: the damage is the fault's (checkpoint-loads judges what the copy did)."""
    events = by_f(history, "checkpoint-scan")
    scans = [e["value"] for e in events]
    if not scans:
        return Verdict("unknown", {"reason": "no checkpoint was found to check"})
    rotted = _rotted_folders(history)
    bad, excused = [], []
    for e in events:
        s = e["value"]
        if not (s.get("size_ok") and s.get("loadable")):
            (excused if any(d == s.get("dir") and t0 <= e["t"] < t1 for d, t0, t1 in rotted) else bad).append(s)
    caught = [e["value"].get("caught_writing") for e in by_f(history, "fault-start") if e["value"].get("caught_writing")]
    return Verdict(not bad, {"checkpoints": len(scans), "bad": bad, "killed_mid_write": caught,
                             "rotted_at_rest": excused[:10],
                             "stray_tmp": sum(len(s["stray_tmp"]) for s in scans)})


def _rotted_folders(history: list[dict]) -> list[tuple[str, float, float]]:
    """(the copy's folder, from the bit-rot, until the copy's next local checkpoint) per bit-rot."""
    out = []
    for e in by_f(history, "fault-start"):
        v = e["value"]
        if v.get("kind") == "bit-rot" and v.get("rotted") and str(v.get("target", "")).startswith("shard-"):
            node = v["target"]
            nxt = min((x["t"] for x in by_f(history, "checkpoint-local") if x.get("node") == node and x["t"] > e["t"]),
                      default=float("inf"))
            out.append((f"data/{node.replace('/', '-')}", e["t"], nxt))
    return out


def checkpoints_monotone(history: list[dict], ctx: dict) -> Verdict:
    """A shard's shared checkpoint only moves forward: in the order they were written, every one
    is at least as new as the one before by (term, epoch of its last entry, seq). A deposed
    primary that overwrote its successor's checkpoint would hand an older state to a restore."""
    cps: dict[int, list[tuple[float, tuple, dict]]] = {}
    for e in by_f(history, "checkpoint"):
        v = e["value"]
        cps.setdefault(v["shard"], []).append((v.get("written", e["t"]), checkpoint_order(v), {**v, "node": e["node"]}))
    if not cps:
        return unknown("no shared checkpoint was written")
    back = []
    for shard, xs in sorted(cps.items()):
        best: tuple | None = None
        for t, key, v in sorted(xs, key=lambda x: x[0]):
            if best is not None and key < best[0]:
                back.append({"shard": shard, "by": v["node"], "term_epoch_seq": list(key),
                             "after": list(best[0]), "after_by": best[1]})
            if best is None or key > best[0]:
                best = (key, v["node"])
    return Verdict(not back, {"checkpoints": {str(k): len(v) for k, v in cps.items()}, "regressions": back[:10],
                              "count": len(back)})


def _older_restores(history: list[dict]) -> tuple[list[dict], list[dict]]:
    """Each restore with the loss it declared and the loss the best restore would have declared:
    the shard's shared checkpoint as the folder held it when the restore ran (the newest
    published before it by (term, epoch, seq): the folder only moves forward), compared the way
    psnodes chooses (epoch of the last entry, seq). A restore that came back from older state
    than that (its own stale folder, an older file) lost updates it did not have to."""
    cps: dict[int, list[tuple[float, tuple, dict]]] = {}
    for e in by_f(history, "checkpoint"):
        v = e["value"]
        cps.setdefault(v["shard"], []).append((v.get("written", e["t"]), checkpoint_order(v), v))
    acks = [(e["t"], e["value"]) for e in by_f(history, "push", "ok")]
    figures, worse = [], []
    for e in by_f(history, "restore"):
        r = e["value"]
        at = r.get("time", e["t"])
        # a write this close before the restore may have renamed after the restorer read the folder
        there = [(key, v) for w, key, v in cps.get(r["shard"], []) if w < at - RACE_S]
        before = [v for t, v in acks if v.get("shard") == r["shard"] and t < e["t"]]
        row = {"shard": r["shard"], "epoch": r.get("epoch"), "source": r.get("source"),
               "restored_seq": r["restored_seq"], "restored_seq_epoch": r.get("restored_seq_epoch"),
               "declared_loss": sum(1 for v in before if v["seq"] > r["restored_seq"])}
        if there:
            best = max(there, key=lambda kv: kv[0])[1]
            row.update(best_checkpoint={k: best.get(k) for k in ("seq", "epoch", "term")},
                       best_loss=sum(1 for v in before if v["seq"] > best["seq"]))
            mine = (r["restored_seq_epoch"], r["restored_seq"]) if "restored_seq_epoch" in r else (None, r["restored_seq"])
            theirs = (int(best.get("epoch", 0)), int(best["seq"]))
            if mine[1] < theirs[1] if mine[0] is None else mine < theirs:
                worse.append(row)
        figures.append(row)
    return figures, worse


def losses_accounted(history: list[dict], ctx: dict) -> Verdict:
    """Acked updates missing at the end are all covered by a reported restore from checkpoint
    (same shard, restored below the ack's seq, after the ack), and no restore came back from older
    state than the shard's newest checkpoint when it ran: a declared loss larger than the best
    restore's fails, with both figures."""
    if not by_f(history, "push", "ok"):
        return unknown("no push was acknowledged: no loss to account for")
    figures, worse = _older_restores(history)
    prim = {s["shard"]: s for s in final_states(history) if s.get("alive") and s.get("role") == "primary"}
    restores = [(e["t"], e["value"]) for e in by_f(history, "restore")]
    unexplained, explained = [], 0
    for e in by_f(history, "push", "ok"):
        v = e["value"]
        p = prim.get(v["shard"])
        if p is None:
            return Verdict("unknown", {"reason": f"no live primary for shard {v['shard']} at the end"})
        ranges = p["applied"].get(idem(v), p["applied"].get(v["worker"], []))
        if any(lo <= v["req_id"] <= hi for lo, hi in ranges):
            continue
        if any(r["shard"] == v["shard"] and r["restored_seq"] < v["seq"] and t > e["t"] for t, r in restores):
            explained += 1
        else:
            unexplained.append({k: v[k] for k in ("worker", "req_id", "shard", "epoch", "seq")})
    return Verdict(not unexplained and not worse, {"lost_and_reported": explained, "unexplained": unexplained[:10],
                                                   "restores": figures, "restored_older_than_best": worse})


def stops_acking(history: list[dict], ctx: dict) -> Verdict:
    """A primary cut off from its replicas acks nothing at its old epoch once the grace is over."""
    grace = ctx.get("stop_acking_grace_s", 1.0)
    cuts = [(e["t"], e["value"]["isolated_primary"]) for e in by_f(history, "fault-start")
            if e["value"].get("isolated_primary")]
    if not cuts:
        return Verdict("unknown", {"reason": "no fault cut a primary off"})
    late, tested = [], 0
    for t, p in cuts:
        tested += sum(1 for e in by_f(history, "push", "invoke")
                      if e["value"]["shard"] == p["shard"] and e["t"] > t + grace)
        for e in by_f(history, "push", "ok"):
            v = e["value"]
            if v["node"] == p["node"] and v["epoch"] == p["epoch"] and e["t"] > t + grace:
                late.append({"node": p["node"], "epoch": p["epoch"], "t": e["t"], "cut_t": t, "seq": v["seq"]})
    if not late and not tested:
        return unknown("no push for the cut-off primary's shard was sent after the grace: nothing could "
                       "show whether it stopped acking", cut_primaries=[p for _, p in cuts])
    return Verdict(not late, {"cut_primaries": [p for _, p in cuts], "late_acks": late[:10], "grace_s": grace,
                              "pushes_after_grace": tested})


def converge_baseline(history: list[dict], ctx: dict) -> Verdict:
    """The workers' mean final loss is within baseline_margin (default 0.05) of the same scenario's
    fault-free run at the same seed: the faults cost no accuracy."""
    base = ctx.get("baseline_loss")
    done = [e["value"]["final_loss"] for e in by_f(history, "train-done")]
    if base is None or not done:
        return Verdict("unknown", {"reason": "no baseline run or no finished worker", "baseline_loss": base})
    final = sum(done) / len(done)
    margin = ctx.get("baseline_margin", 0.05)
    return Verdict(final <= base + margin, {"final_loss": round(final, 5), "baseline_loss": round(base, 5),
                                            "margin": margin})
