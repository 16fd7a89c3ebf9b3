"""Copies agree after quiescence, every copy a fault took down is back, and a restarted replica
caught up by delta, not by snapshot."""
from __future__ import annotations

from pschaos.harness.checkers.base import KILLS, Verdict, by_f, final_states, unknown, went_down


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
RESTART_S = 5.0      # a restarted copy's catch-up begins this soon after its start is recorded


def _restart_catchups(history: list[dict]) -> tuple[list[dict], set[str], list[dict]]:
    """The catch-up of each restart: the first sync to a copy that began after the fault took it
    down (when the fault landed: a timed kill waits for its moment) and no later than RESTART_S
    after its next start. A later sync answers a later event (a failover that left the copy ahead
    of its new primary, whose unacknowledged tail only a snapshot undoes), not its restart (review
    of issue 32, finding 7: nemesis-soak at seed 2 failed on a bridge partition's divergence 11 s
    after the copy's restart); one that began before the down is an earlier catch-up's. Also what
    went down, and the catch-ups of a copy that was its shard's primary when it went down and came
    back ahead of the promotion that deposed it (a tail only a snapshot undoes)."""
    downs: dict[str, list[tuple[float, float]]] = {}     # node -> [(stamped, went down)]
    for e in by_f(history, "fault-start"):
        v = e["value"]
        if v["kind"] in ("stop", *KILLS, "restart"):
            for name, d in went_down(e):
                downs.setdefault(name, []).append((e["t"], d))
    promotes = sorted(((e["t"], e["value"]) for e in by_f(history, "promote")), key=lambda x: x[0])
    starts = sorted((e["t"], e.get("node")) for e in by_f(history, "start"))
    syncs = sorted(((e["t"] - float(e["value"].get("duration_s") or 0), e["value"]) for e in by_f(history, "sync")),
                   key=lambda x: x[0])
    out, deposed = [], []
    for node, ds in downs.items():
        for stamped, d in ds:
            back = next((t for t, n in starts if n == node and t > stamped), None)
            sync = next((v for began, v in syncs if v["dst"] == node and began >= d
                         and (back is None or began <= back + RESTART_S)), None)
            if sync is None or any(x is sync for x in out):
                continue
            out.append(sync)
            shard = sync.get("shard")
            before = [v for t, v in promotes if t <= d and v.get("shard") == shard]
            after = next((v for t, v in promotes if t > d and v.get("shard") == shard), None)
            if before and before[-1].get("node") == node and after is not None \
                    and int(sync.get("from_seq", -1)) > int(after.get("seq", 1 << 62)):
                deposed.append(sync)
    return out, set(downs), deposed


def catch_up_by_delta(history: list[dict], ctx: dict) -> Verdict:
    """Every catch-up of a restarted replica moved deltas: bytes <= ratio x changed bytes (plus
    FRAMING_BYTES), none needed a full snapshot, and where the scenario sets expect.catchup_vs_snapshot, each
    moved at most that share of a snapshot (a copy down briefly must not move most of the state).
    A restart's catch-up is the first that began after it; a copy that was its shard's primary
    when it went down and came back ahead of its successor's first seq needs a snapshot (its
    unreplicated tail is undone), and is then named, not failed."""
    mine, restarted, deposed = _restart_catchups(history)
    if not mine:
        return unknown("no catch-up of a restarted replica was recorded", restarted=sorted(restarted),
                       syncs=len(by_f(history, "sync")))
    ratio, frac = ctx.get("catchup_ratio", 1.1), ctx.get("catchup_vs_snapshot", 0.5)
    undone = [s for s in deposed if s["kind"] == "snapshot"]
    judged = [s for s in mine if not any(s is u for u in undone)]
    bad = [s for s in judged if s["kind"] == "snapshot" or s["bytes"] > ratio * s["changed_bytes"] + FRAMING_BYTES
           or (frac is not None and s["bytes"] > frac * s["snapshot_bytes"])]
    details = {"catchups": mine, "bad": bad, "ratio_bound": ratio, "framing_bytes": FRAMING_BYTES,
               "snapshot_fraction_bound": frac, "deposed_primary_snapshots": undone}
    if not judged:
        return unknown("every restart's catch-up was a deposed primary's snapshot: no replica's catch-up to judge",
                       **details)
    return Verdict(not bad, details)
