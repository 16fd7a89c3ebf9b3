"""Membership judged by the workers' own events, not by the copies' member-views.

The views say whom a copy's barrier waited for; a reconcile that wrote a wrong record would make
them agree with it. These two checks read what the workers themselves did instead:

- no worker pushed under a lease after a primary's compare-and-swap dropped that lease from the
  record (`member-expire`, `member-leave`), or before the record admitted it (`member-admitted`):
  a worker outside the barrier trains outside the bound (a fenced worker stops before its lease
  can run out, psnodes/membership/members.py, so a correct one never does);
- a joiner's start lies within what the workers had pushed to the admitting shard: at most one
  past the highest clock any push to it had invoked (no round nobody reached), and, with sync
  replication, at least one past the highest clock acked there JOIN_SLACK_S before the join was
  written (the front was read by then; it never drags the barrier back).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Callable, Hashable

from pschaos.harness.checkers.base import by_f

JOIN_SLACK_S = 1.0      # the reconcile reads the front before its compare-and-swap (0.5 s etcd timeout, twice)


def _registrations(history: list[dict]) -> dict[tuple[str, int], tuple[list[float], list[int]]]:
    """Per (worker, incarnation): when it registered which lease, in order."""
    out: dict[tuple[str, int], tuple[list[float], list[int]]] = {}
    for e in sorted(by_f(history, "member-register"), key=lambda e: e["t"]):
        v = e["value"]
        ts, ls = out.setdefault((v["worker"], v.get("incarnation", 0)), ([], []))
        ts.append(e["t"])
        ls.append(v["lease"])
    return out


def pushes_outside_membership(history: list[dict]) -> list[dict]:
    """Push invokes made under a lease the record had dropped, or not yet admitted. A push of a
    process that never registered (async training, or no evidence) is not judged here."""
    regs = _registrations(history)
    if not regs:
        return []
    dropped: dict[tuple[str, int], float] = {}
    for f in ("member-expire", "member-leave"):
        for e in by_f(history, f):
            k = (e["value"]["worker"], e["value"].get("lease", 0))
            dropped[k] = min(e["t"], dropped.get(k, e["t"]))
    admitted: dict[tuple[str, int], float] = {}
    for e in by_f(history, "member-admitted"):
        k = (e["value"]["worker"], e["value"].get("lease", 0))
        admitted[k] = min(e["t"], admitted.get(k, e["t"]))
    out = []
    for e in by_f(history, "push", "invoke"):
        v, t = e["value"], e["t"]
        ts, ls = regs.get((v["worker"], v.get("incarnation", 0)), ([], []))
        i = bisect_right(ts, t)
        if not i:
            continue
        lease = ls[i - 1]
        gone, adm = dropped.get((v["worker"], lease)), admitted.get((v["worker"], lease))
        if gone is not None and gone < t:
            why = f"the record dropped lease {lease} at t={round(gone, 4)}"
        elif adm is None or adm > t:
            why = f"lease {lease} was not admitted yet"
        else:
            continue
        out.append({"worker": v["worker"], "clock": v.get("clock"), "shard": v.get("shard"), "t": round(t, 4),
                    "why": why})
    return out


def clock_series(events: list[dict], key: Callable[[dict], Hashable]) -> dict:
    """Per key of an event's value (a shard; a worker and shard): the event times in order and the
    highest clock up to each, so one bisection answers "the highest clock before t"."""
    pairs: dict = {}
    for e in events:
        pairs.setdefault(key(e["value"]), []).append((e["t"], e["value"].get("clock", -1)))
    out = {}
    for k, ps in pairs.items():
        ps.sort(key=lambda tc: tc[0])
        ts, best, top = [], [], -1
        for t, c in ps:
            top = max(top, c)
            ts.append(t)
            best.append(top)
        out[k] = (ts, best)
    return out


def _highest_before(series: tuple[list[float], list[int]] | None, t: float) -> int:
    if series is None:
        return -1
    ts, best = series
    i = bisect_left(ts, t)
    return best[i - 1] if i else -1


def join_violations(history: list[dict], ctx: dict) -> list[dict]:
    """Joins whose start lies outside [acked front, invoked front] of the admitting shard."""
    joins = by_f(history, "member-join")
    if not joins:
        return []
    invoked = clock_series(by_f(history, "push", "invoke"), lambda v: v.get("shard", 0))
    acked = clock_series(by_f(history, "push", "ok"), lambda v: v.get("shard", 0))
    sync = ctx.get("replication", "sync") == "sync"
    out = []
    for e in joins:
        v, t = e["value"], e["t"]
        by = str(v.get("by", ""))
        if not by.startswith("shard-"):
            continue
        shard = int(by.split("-", 1)[1].split("/", 1)[0])
        hi = _highest_before(invoked.get(shard), t) + 1
        lo = _highest_before(acked.get(shard), t - JOIN_SLACK_S) + 1 if sync else 0
        if not lo <= v["start"] <= hi:
            out.append({"worker": v["worker"], "start": v["start"], "shard": shard, "t": round(t, 4),
                        "acked_front": lo, "invoked_front": hi})
    return out
