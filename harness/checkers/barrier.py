"""BSP/SSP barrier checks, judged against worker membership: staleness and barrier-live.

The barrier waits for the members of a generation (psnodes/core/membership.py), not for every
worker that ever trained, so both checks read who was a member when: each copy records a
`member-view` (generation, members and their start clocks) the moment it adopts a generation,
and each pull's reply names the copy that served it. A pull served between its invoke and its
ok was gated by one of the views that copy held in that window; a member is *certainly* one the
pull waited for when it is in all of them (a joiner counts from the first view that surely
gated, a leaver until the last). Without views, or with a step whose pull no view covers, the
checks say unknown: no evidence, no pass.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right

from .base import Verdict, by_f, op_key, unknown

LOSS_KINDS = ("kill", "stop", "pause")      # a worker fault that silences it: the barrier must drop it
TIMED_OUT = "BSP/SSP wait timed out"
GRACE_S = 3.0          # beyond the member TTL: etcd's lessor (500 ms), the nodes' poll, a step
GRACEFUL = ("stop", "scale-in")     # the worker leaves at once: no TTL to wait for
GRACEFUL_S = 1.0       # a graceful leave judged over at least this long
HELD_S = 1.0           # survivors silent this long until the heal (or the end): held by the lost worker


def _views(history: list[dict]) -> dict[str, tuple[list[float], list[dict]]]:
    """Per copy: the times it adopted a generation and the members ({name: start}) of each."""
    out: dict[str, tuple[list[float], list[dict]]] = {}
    for e in sorted(by_f(history, "member-view"), key=lambda e: e["t"]):
        ts, vs = out.setdefault(e["node"], ([], []))
        ts.append(e["t"])
        vs.append(e["value"]["members"])
    return out


def _gating(views: tuple[list[float], list[dict]] | None, t_inv: float, t_ok: float) -> dict[str, int] | None:
    """Members (name -> start) certainly gating a pull served by this copy in [t_inv, t_ok]: in
    every view it held in that window; None when it held none (no evidence)."""
    if views is None:
        return None
    ts, vs = views
    lo = max(0, bisect_right(ts, t_inv) - 1)
    if not ts or ts[lo] > t_ok:
        return None
    held = vs[lo:bisect_right(ts, t_ok)]
    names = set(held[0]).intersection(*held[1:])
    return {n: min(v[n] for v in held) for n in names}


def _step_pulls(history: list[dict]) -> dict[tuple[str, int], tuple[list[float], list[tuple]]]:
    """Per (worker, shard): the gated pulls that completed, as (t_ok, t_inv, node), in order."""
    invoked = {op_key(e): e["t"] for e in by_f(history, "pull", "invoke") if "op_id" in e}
    out: dict[tuple[str, int], tuple[list[float], list[tuple]]] = {}
    for e in sorted(by_f(history, "pull", "ok"), key=lambda e: e["t"]):
        v = e["value"]
        if v.get("min_clock", -1) < 0:
            continue
        ts, ps = out.setdefault((v["worker"], v["shard"]), ([], []))
        ts.append(e["t"])
        ps.append((e["t"], invoked.get(op_key(e), e["t"]), v.get("node", "")))
    return out


def _invoked_clocks(history: list[dict]) -> dict[str, tuple[list[float], list[int]]]:
    """Per worker: push invoke times and the highest clock invoked up to each (one bisection
    answers "the newest clock it had started before t")."""
    inv: dict[str, list[tuple[float, int]]] = {}
    for e in by_f(history, "push", "invoke"):
        inv.setdefault(e["value"]["worker"], []).append((e["t"], e["value"].get("clock", -1)))
    out = {}
    for w, pairs in inv.items():
        pairs.sort(key=lambda tc: tc[0])
        ts, best, top = [], [], -1
        for t, c in pairs:
            top = max(top, c)
            ts.append(t)
            best.append(top)
        out[w] = (ts, best)
    return out


def staleness(history: list[dict], ctx: dict) -> Verdict:
    """BSP/SSP(tau): when a worker finished step s, every member that surely gated its pulls had
    started pushing step s-tau-1, or had joined at a start clock of at least s-tau.

    Judged from push invokes (sent before any shard applied them) against the step's end, so the
    order is certain across processes; membership from the serving copies' views (module doc).
    """
    mode = ctx.get("training", "async")
    if mode == "async":
        return unknown("training is async: there is no staleness bound to check (use bsp or ssp)")
    tau = 0 if mode == "bsp" else ctx.get("staleness", 0)
    steps = by_f(history, "train-step")
    if not steps:
        return unknown("no worker finished a step: nothing to judge")
    views = _views(history)
    if not views:
        return unknown("no copy recorded a member-view: whom the barrier waited for is unknown")
    pulls = _step_pulls(history)
    clocks = _invoked_clocks(history)
    shards = sorted({s for _, s in pulls})
    worst, bad, unjudged, judged = 0, [], [], 0
    for e in steps:
        w, s, t = e["value"]["worker"], e["value"]["step"], e["t"]
        gating: dict[str, int] = {}
        covered = False
        for k in shards:
            ts, ps = pulls.get((w, k), ([], []))
            i = bisect_right(ts, t)
            if not i:
                continue
            t_ok, t_inv, node = ps[i - 1]
            got = _gating(views.get(node), t_inv, t_ok)
            if got is None:
                continue
            covered = True
            for n, start in got.items():
                gating[n] = min(start, gating.get(n, start))
        if not covered:
            unjudged.append({"worker": w, "step": s, "t": round(t, 4)})
            continue
        judged += 1
        for other, start in sorted(gating.items()):
            if other == w:
                continue
            ts, best = clocks.get(other, ([], []))
            k = bisect_left(ts, t)             # invokes strictly before the step's end
            done = max(best[k - 1] if k else -1, start - 1)
            lead = s - done - 1
            worst = max(worst, lead)
            if lead > tau:
                bad.append({"worker": w, "step": s, "other": other, "other_clock": done, "lead": lead})
    details = {"mode": mode, "tau": tau, "max_lead": worst, "violations": bad[:10], "violation_count": len(bad),
               "steps_judged": judged, "steps_unjudged": len(unjudged)}
    if bad:
        return Verdict(False, details)
    if unjudged:
        return unknown(f"{len(unjudged)} step(s) had no gated pull a member-view covers: their barrier is unknown",
                       example=unjudged[0], **details)
    return Verdict(True, details)


def _losses(history: list[dict]) -> list[dict]:
    """Faults that silenced workers: (victims, start, end) where end is the heal (None: never)."""
    stops = {e["value"].get("index"): e["t"] for e in by_f(history, "fault-stop")}
    out = []
    for e in by_f(history, "fault-start"):
        v = e["value"]
        kind, target = v.get("kind"), str(v.get("target", ""))
        if kind in LOSS_KINDS and target.startswith("worker-"):
            out.append({"kind": kind, "victims": [target], "t": e["t"], "healed": stops.get(v.get("index"))})
        elif kind == "scale-in" and v.get("removed"):
            out.append({"kind": kind, "victims": list(v["removed"]), "t": e["t"], "healed": None})
    return out


def barrier_live(history: list[dict], ctx: dict) -> Verdict:
    """A worker that dies or leaves does not hold the BSP/SSP barrier: no gated pull timed out,
    and after each worker loss the others stepped again before the lost one came back.

    Each loss's stall is the longest gap between the survivors' consecutive steps from the loss
    (measured and reported); they were held when they stepped no more in the last second before
    its heal (or their end). A crash or pause healed sooner
    than member_ttl_s + 3 s (a graceful stop or scale-in: 1 s) cannot tell a live barrier from
    one that waited: it is not judged, and says so.
    """
    mode = ctx.get("training", "async")
    if mode == "async":
        return unknown("training is async: there is no barrier (use bsp or ssp)")
    steps = sorted(by_f(history, "train-step"), key=lambda e: e["t"])
    if not steps:
        return unknown("no worker finished a step: nothing to judge")
    timed_out = [{"worker": e["value"].get("worker"), "shard": e["value"].get("shard"),
                  "min_clock": e["value"].get("min_clock"), "t": round(e["t"], 4)}
                 for e in by_f(history, "pull", "fail")
                 if e["value"].get("min_clock", -1) >= 0 and TIMED_OUT in str(e["value"].get("error", ""))]
    ttl = ctx.get("member_ttl_s")
    end = max(e["t"] for e in history)
    finished: dict[str, float] = {e["value"]["worker"]: e["t"] for e in by_f(history, "train-done")}
    stalls, unjudged = [], []
    for loss in _losses(history):
        t0, t1 = loss["t"], loss["healed"] if loss["healed"] is not None else end
        others = {e["value"]["worker"] for e in steps} - set(loss["victims"])
        if others and all(finished.get(w, t1) < t1 for w in others):
            t1 = max(finished[w] for w in others)       # the survivors' workload ended first
        need = GRACEFUL_S if loss["kind"] in GRACEFUL else (ttl or 0) + GRACE_S
        if (ttl is None and loss["kind"] not in GRACEFUL) or t1 - t0 < need:
            unjudged.append({**loss, "why": f"over {round(t1 - t0, 3)} s, under the {need} s it takes to tell "
                                            f"(member_ttl_s {ttl})"})
            continue
        times = [e["t"] for e in steps if e["value"]["worker"] not in loss["victims"] and t0 <= e["t"] <= t1]
        edges = [t0, *times]
        gaps = [b - a for a, b in zip(edges, edges[1:])]
        silent = t1 - edges[-1]          # survivors' silence at the end: the lost worker still held them
        stalls.append({"kind": loss["kind"], "victims": loss["victims"], "t": round(t0, 4),
                       "stall_s": round(max(gaps, default=silent), 4), "silent_at_end_s": round(silent, 4),
                       "resumed": silent < HELD_S})
    held = [s for s in stalls if not s["resumed"]]
    details = {"mode": mode, "member_ttl_s": ttl, "stalls": stalls, "held_by_lost_worker": held,
               "gated_pull_timeouts": timed_out[:10], "timeout_count": len(timed_out), "not_judged": unjudged}
    if timed_out or held:
        return Verdict(False, details)
    if unjudged and not stalls:
        return unknown("every worker loss was too short to tell a live barrier from one that waited", **details)
    return Verdict(True, details)
