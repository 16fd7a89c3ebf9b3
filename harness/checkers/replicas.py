"""Copies agree after quiescence, every copy a fault took down is back, and a restarted replica
caught up by delta, not by snapshot."""
from __future__ import annotations

from pschaos.harness.checkers.base import KILLS, Verdict, by_f, final_states, unknown, victims


def replicas_match(history: list[dict], ctx: dict) -> Verdict:
    """Every copy of every shard is alive at the end (the run healed every fault), each shard has
    exactly one primary, and every copy has the primary's seq and checksum."""
    states = final_states(history)
    if not states:
        return unknown("no final state of any copy was recorded")
    dead = sorted(s["node"] for s in states if not s.get("alive"))
    by_shard: dict[int, list[dict]] = {}
    for s in states:
        if s.get("alive"):
            by_shard.setdefault(s["shard"], []).append(s)
    diverged, no_primary = [], []
    for shard, copies in sorted(by_shard.items()):
        prim = [c for c in copies if c["role"] == "primary"]
        if len(prim) != 1:
            no_primary.append({"shard": shard, "primaries": [c["node"] for c in prim]})
            continue
        p = prim[0]
        for c in copies:
            if (c["seq"], c["checksum"]) != (p["seq"], p["checksum"]):
                diverged.append({"shard": shard, "node": c["node"], "seq": c["seq"], "primary_seq": p["seq"],
                                 "checksum": c["checksum"], "primary_checksum": p["checksum"]})
    return Verdict(not dead and not diverged and not no_primary, {
        "diverged": diverged, "dead_at_end": dead, "without_one_primary": no_primary,
        "copies": {str(k): len(v) for k, v in by_shard.items()}})


# what a delta carries beside the changed tensors (entry headers, the applied sets and dedup
# table): on a small model with every key changed (ssp-kill-primary's 26 KB) they are 10% alone
FRAMING_BYTES = 4096


def catch_up_by_delta(history: list[dict], ctx: dict) -> Verdict:
    """Every catch-up of a restarted replica moved deltas: bytes <= ratio x changed bytes (plus
    FRAMING_BYTES), none
    needed a full snapshot, and where the scenario sets expect.catchup_vs_snapshot, each moved at
    most that share of a snapshot (a copy down briefly must not move most of the state)."""
    syncs = [e["value"] for e in by_f(history, "sync")]
    down_at: dict[str, float] = {}
    for e in by_f(history, "fault-start"):
        if e["value"]["kind"] in ("stop", *KILLS, "restart"):
            for name in victims(e["value"]):
                down_at.setdefault(name, e["t"])
    restarted = set(down_at)
    # a catch-up the copy did before it went down proves nothing about its restart
    mine = [e["value"] for e in by_f(history, "sync")
            if e["value"]["dst"] in down_at and e["t"] > down_at[e["value"]["dst"]]]
    if not mine:
        return unknown("no catch-up of a restarted replica was recorded", restarted=sorted(restarted),
                       syncs=len(syncs))
    ratio, frac = ctx.get("catchup_ratio", 1.1), ctx.get("catchup_vs_snapshot", 0.5)
    bad = [s for s in mine if s["kind"] == "snapshot" or s["bytes"] > ratio * s["changed_bytes"] + FRAMING_BYTES
           or (frac is not None and s["bytes"] > frac * s["snapshot_bytes"])]
    return Verdict(not bad, {"catchups": mine, "bad": bad, "ratio_bound": ratio, "framing_bytes": FRAMING_BYTES,
                             "snapshot_fraction_bound": frac})
