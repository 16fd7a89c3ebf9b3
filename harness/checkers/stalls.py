"""What a replica saw when it replaced its primary, and whether the primary stood still then.

A failover that no fault explains is judged spurious (pschaos.harness.checkers.spurious); the
judgement is only useful if it says why the replica stood. The replica's `suspect` event carries
the silence it stood on, the threshold its detector had reached and its last probe round (answered
or not, how long it waited, how long it took: psnodes.core.detector.probe_record). The old
primary's `local-pause` events carry the moments its own elector woke later than it asked, and the
CPU time the whole process used meanwhile: near none when the host did not run it, about all of
it when its own threads held the interpreter.

A primary that stood still off the CPU, by its own clock, for all of the silence its replica
stood on but stretches shorter than what the replica's detector suspects at (and, where the
replica's probe went unanswered, for most of that probe), did not run then: the host did not
schedule it, as an injected `pause` would not. By the detector's contract (never before
`phi_floor_s`), replacing it is what should happen. A stall in which the process kept the CPU
(its own threads held the interpreter: a long collection, a slow serialization) is the
primary's own doing and excuses nothing; neither does a stall of another term or shard. That is
evidence from two processes, not an allowance of time; a history without either event excuses
nothing.
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


def _covered(spans: list[tuple[float, float]], lo: float, hi: float) -> tuple[float, float]:
    """Of [lo, hi]: the time the spans cover, and the longest stretch they leave uncovered."""
    cuts = sorted((max(a, lo), min(b, hi)) for a, b in spans if min(b, hi) > max(a, lo))
    covered, longest, at = 0.0, 0.0, lo
    for a, b in cuts:
        longest = max(longest, a - at)
        covered += max(0.0, b - max(a, at))
        at = max(at, b)
    return covered, max(longest, hi - at)


def stood_still(history: list[dict], old: str, shard: int, epoch: int, seen: dict | None) -> list[dict]:
    """The old primary's own stalls (`local-pause` as primary of `shard`'s term `epoch`) that
    overlap the silence `seen` (a `suspicion`): each with its span (from its wake-up, not from
    when the event was written), the overlap, and whether the process was off the CPU for it
    (`off_cpu`: it used under half the lateness in CPU time; one whose own threads held the
    interpreter used about all of it, and that stall is the primary's doing, no excuse)."""
    if not seen or not isinstance(seen.get("silent_ms"), (int, float)):
        return []
    end = seen["t"]
    start = end - seen["silent_ms"] / 1000
    out = []
    for e in by_f(history, "local-pause"):
        v = e.get("value") or {}
        late, woke = v.get("late_ms"), v.get("woke_ms", 0.0)
        if e.get("node") != old or v.get("role") != "primary" or v.get("shard") != shard or v.get("epoch") != epoch \
                or not isinstance(late, (int, float)) or not isinstance(woke, (int, float)):
            continue
        hi = e["t"] - woke / 1000
        lo = hi - late / 1000
        overlap = min(hi, end) - max(lo, start)
        if overlap > 0:
            cpu = v.get("cpu_ms")
            out.append({"from": round(lo, 3), "to": round(hi, 3), "late_ms": late, "cpu_ms": cpu,
                        "overlap_ms": round(overlap * 1000, 1),
                        "off_cpu": isinstance(cpu, (int, float)) and cpu < late / 2})
    return out


def stall_excuse(old: str, seen: dict | None, stalls: list[dict]) -> str | None:
    """The excuse, when the old primary's off-CPU stalls leave no stretch of the silence as long
    as the silence its successor's detector suspects at (`silence_ms`): the heartbeats it missed
    are the ones the primary could not send. And when the successor's last probe went unanswered,
    those stalls cover at least half of that probe's round (an answer could not come). Stalls
    are told apart by their spans, never added up across a stretch in which the primary ran."""
    if not seen or not isinstance(seen.get("silence_ms"), (int, float)):
        return None
    spans = [(s["from"], s["to"]) for s in stalls if s["off_cpu"]]
    if not spans:
        return None
    end = seen["t"]
    covered, gap = _covered(spans, end - seen["silent_ms"] / 1000, end)
    if gap * 1000 >= seen["silence_ms"]:
        return None
    probe = seen.get("probe") or {}
    if probe.get("ran") and not probe.get("answered"):
        p_end = end - (probe.get("ended_ms") or 0.0) / 1000
        p_start = p_end - (probe.get("took_ms") or 0.0) / 1000
        in_probe, _ = _covered(spans, p_start, p_end)
        if in_probe < (p_end - p_start) / 2:
            return None
    return (f"{old} stood still off the CPU by its own clock (local-pause) for {round(covered * 1000, 1)} ms of "
            f"the {seen['silent_ms']} ms silence its replica stood on, leaving no stretch of the "
            f"{seen['silence_ms']} ms its detector suspects at")
