"""Shrinking a failing fault schedule to the smallest one that still fails.

A schedule found at random carries faults that played no part in the failure; a reviewer wants
the one or two that matter, as early and short as they can be, on the smallest cluster. The
shrinker is greedy delta debugging over four moves, each kept only when the run still fails
*the same way* (`fails` is the oracle: a run of the candidate that fails at least one of the
checks the original failure failed, so shrinking never wanders onto a different bug):
1. drop one fault (fewest faults);
2. shorten a fault, bisecting its duration down towards `min_duration_s` (shortest);
3. move a fault earlier, bisecting its start down towards the window's start (earliest);
4. one worker, shard or copy fewer, where no fault names what would go (fewest nodes).
The moves repeat until a whole round changes nothing or the budget of runs is spent. The
oracle is deterministic on the simulator (same seed, same history), so what it accepts replays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.run.scenario import Fault

Oracle = Callable[[list[Fault], ClusterSpec], bool]


@dataclass
class Shrunk:
    faults: list[Fault]
    cluster: ClusterSpec
    runs: int = 0
    steps: list[str] = field(default_factory=list)      # what each accepted move did
    exhausted: bool = False                              # the budget ended before a quiet round


def _moved(f: Fault, **upd) -> Fault:
    at = f.at.model_copy(update={"time": upd.pop("time")}) if "time" in upd else f.at
    return f.model_copy(update={"at": at, **upd})


def _names_shard(f: Fault, shard: int) -> bool:
    t = f.target
    return f"shard={shard})" in t or f"shard({shard})" in t or f"shard-{shard}/" in t


def _smaller_clusters(c: ClusterSpec, faults: list[Fault]) -> list[tuple[str, ClusterSpec]]:
    out = []
    if c.workers > 1 and not any(f"worker-{c.workers - 1}" in f.target for f in faults):
        out.append((f"workers {c.workers} -> {c.workers - 1}", c.model_copy(update={"workers": c.workers - 1})))
    if c.shards > 1 and not any(_names_shard(f, c.shards - 1) for f in faults):
        out.append((f"shards {c.shards} -> {c.shards - 1}", c.model_copy(update={"shards": c.shards - 1})))
    # never below 2 copies: a 1-copy shard that loses its copy loses acked updates by design
    if c.copies > 2 and not any(f"/{c.copies - 1}" in f.target for f in faults):
        smaller = c.model_copy(update={"copies": c.copies - 1, "min_isr": min(c.min_isr, c.copies - 1)})
        out.append((f"copies {c.copies} -> {c.copies - 1}", smaller))
    return out


def bisect_down(still_fails: Callable[[float], bool], lo: float, hi: float, tol: float = 0.1) -> bool:
    """Lower a value from `hi` towards `lo` while `still_fails(value)` holds: try `lo` first (the
    common case: the value did not matter), then bisect between the lowest failing value and the
    highest passing one, to within `tol`. True when the value moved (the last accepted one stands)."""
    moved = False
    if hi - lo < tol:
        return False
    if still_fails(round(lo, 3)):
        return True
    while hi - lo >= tol:
        mid = round((lo + hi) / 2, 3)
        if still_fails(mid):
            hi, moved = mid, True
        else:
            lo = mid
    return moved


def shrink(faults: list[Fault], cluster: ClusterSpec, fails: Oracle, budget: int = 40,
           window_start: float = 1.0, min_duration_s: float = 0.2,
           say: Callable[[str], None] = lambda m: None) -> Shrunk:
    """The smallest schedule and cluster found within `budget` oracle runs (module docstring)."""
    cur = Shrunk(list(faults), cluster)
    tried: set[str] = set()          # a candidate judged once is never run again (the oracle is deterministic)

    def attempt(cand: list[Fault], cl: ClusterSpec, what: str) -> bool:
        key = repr(([f.model_dump() for f in sorted(cand, key=lambda f: f.at.time)], cl.model_dump()))
        if key in tried:
            return False
        tried.add(key)
        if cur.runs >= budget:
            cur.exhausted = True
            return False
        cur.runs += 1
        ok = fails(cand, cl)
        say(f"shrink run {cur.runs}/{budget}: {what}: {'still fails, kept' if ok else 'passes, undone'}")
        if ok:
            cur.faults, cur.cluster = sorted(cand, key=lambda f: f.at.time), cl
            cur.steps.append(what)
        return ok

    changed = True
    while changed and not cur.exhausted:
        changed = False
        i = 0
        while i < len(cur.faults) and len(cur.faults) > 1:              # 1. fewest faults
            f = cur.faults[i]
            if attempt(cur.faults[:i] + cur.faults[i + 1:], cur.cluster, f"drop {f.kind} {f.target} at {f.at.time}s"):
                changed = True
            else:
                i += 1
        for i in range(len(cur.faults)):                                 # 2. shortest
            f = cur.faults[i]
            if f.duration_s and bisect_down(lambda d, f=f, i=i: attempt(
                    cur.faults[:i] + [_moved(f, duration_s=d)] + cur.faults[i + 1:], cur.cluster,
                    f"{f.kind} {f.target} lasts {d:.2f}s, not {f.duration_s:.2f}s"), min_duration_s, f.duration_s):
                changed = True
        for f in list(cur.faults):                                       # 3. earliest
            ref = [f]                   # the fault as it stands now (a move replaces the object)

            def earlier(t: float, ref: list[Fault] = ref) -> bool:
                i = next(k for k, g in enumerate(cur.faults) if g is ref[0])
                m = _moved(ref[0], time=t)
                ok = attempt(cur.faults[:i] + [m] + cur.faults[i + 1:], cur.cluster,
                             f"{m.kind} {m.target} at {t:.2f}s, not {ref[0].at.time:.2f}s")
                if ok:
                    ref[0] = m
                return ok
            if bisect_down(earlier, window_start, f.at.time):
                changed = True
        for what, cl in _smaller_clusters(cur.cluster, cur.faults):      # 4. fewest nodes
            if attempt(cur.faults, cl, what):
                changed = True
                break
    return cur


__all__ = ["Shrunk", "shrink"]
