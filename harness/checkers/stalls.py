"""What a replica saw when it replaced its primary, and whether the primary stood still then.

A failover that no fault explains is judged spurious (pschaos.harness.checkers.spurious); the
judgement is only useful if it says why the replica stood. The replica's `suspect` event carries
the silence it stood on, the threshold its detector had reached and its last probe round (answered
or not, how long it waited, how long it took: psnodes.core.detector.probe_record). The old
primary's `local-pause` events carry the moments its own elector woke later than it asked: the
whole process stood still (starved of CPU by the host, or held up by its own runtime), so it sent
no heartbeat and answered no probe.

A primary that stood still, by its own clock, for at least the silence the replica's detector
suspects at, within the silence the replica stood on, was not a live primary for that while: by
the detector's contract (never before `phi_floor_s`), replacing it is what should happen, as it
is for an injected `pause`. That is evidence from two processes, not an allowance of time; a
history without either event excuses nothing.
"""
from __future__ import annotations

from pschaos.harness.checkers.base import by_f


def suspicion(history: list[dict], shard: int, epoch: int, node: str, t: float) -> dict | None:
    """The last `suspect` event of `node` against `shard`'s term `epoch` at or before `t` (its
    promotion to the next term), as the evidence a report shows; None when there is none."""
    found = None
    for e in by_f(history, "suspect"):
        v = e.get("value") or {}
        if e.get("node") == node and v.get("shard") == shard and v.get("epoch") == epoch and e.get("t", 0) <= t:
            found = e
    if found is None:
        return None
    v = found["value"]
    keep = ("silent_ms", "silence_ms", "mean_ms", "std_ms", "samples", "probe")
    return {"t": round(found["t"], 3), **{k: v[k] for k in keep if k in v}}


def stood_still(history: list[dict], old: str, seen: dict | None) -> list[dict]:
    """The old primary's own stalls (`local-pause` as primary) that overlap the silence `seen`
    (a `suspicion`), each with the overlap in ms."""
    if not seen or not isinstance(seen.get("silent_ms"), (int, float)):
        return []
    end = seen["t"]
    start = end - seen["silent_ms"] / 1000
    out = []
    for e in by_f(history, "local-pause"):
        v = e.get("value") or {}
        late = v.get("late_ms")
        if e.get("node") != old or v.get("role") != "primary" or not isinstance(late, (int, float)):
            continue
        lo, hi = e["t"] - late / 1000, e["t"]
        overlap = min(hi, end) - max(lo, start)
        if overlap > 0:
            out.append({"t": round(e["t"], 3), "late_ms": late, "overlap_ms": round(overlap * 1000, 1)})
    return out


def stall_excuse(old: str, seen: dict | None, stalls: list[dict]) -> str | None:
    """The excuse, when the old primary's stalls within the silence add up to at least the
    silence the replica's detector suspects at (`silence_ms` in its `suspect` event)."""
    if not seen or not stalls or not isinstance(seen.get("silence_ms"), (int, float)):
        return None
    total = sum(s["overlap_ms"] for s in stalls)
    if total < seen["silence_ms"]:
        return None
    return (f"{old} stood still {round(total, 1)} ms by its own clock (local-pause) within the "
            f"{seen['silent_ms']} ms silence its replica stood on (the detector suspects at {seen['silence_ms']} ms)")
