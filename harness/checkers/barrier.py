"""BSP/SSP barrier checks, judged against worker membership: staleness and barrier-live.

The barrier waits for the members of a generation (psnodes/core/membership.py), not for every
worker that ever trained, so both checks read who was a member when: each copy records a
`member-view` (generation, members with their start clocks and leases) the moment it adopts a
generation, and each pull's reply names the copy that served it. A pull served between its
invoke and its ok was gated by one of the views that copy held in that window; a member is
*certainly* one the pull waited for when it is in all of them under one lease (a joiner counts
from the first view that surely gated, a leaver until the last; a worker that restarted within
its TTL is two members, not one with the smaller start). Without views, or with a step whose
pull no view covers, the checks say unknown: no evidence, no pass.

The views are the system's own word, so staleness also checks membership against the workers'
own events (members_vs_workers.py): no worker pushed after the record dropped it, and every
joiner's start lies within the clocks the workers had pushed by then.
"""
from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from pschaos.harness.checkers.base import Verdict, by_f, op_key, unknown
from pschaos.harness.checkers.members_vs_workers import clock_series, join_violations, pushes_outside_membership

LOSS_KINDS = ("kill", "stop", "pause")      # a worker fault that silences it: the barrier must drop it
GRACE_S = 3.0          # beyond the member TTL: etcd's lessor (500 ms), the nodes' poll, a step or two
GRACEFUL = ("stop", "scale-in")     # the worker leaves at once: no TTL to wait for
GRACEFUL_S = 2.0       # a graceful leave: one transaction, a poll (0.1 s), a step or two on a loaded machine
CUT_FROM_ETCD = re.compile(r"^(?:(worker-\d+)\s*->\s*etcd|etcd\s*->\s*(worker-\d+))$")


def _views(history: list[dict]) -> dict[str, tuple[list[float], list[dict]]]:
    """Per copy: the times it adopted a generation and its members ({name: (start, lease)})."""
    out: dict[str, tuple[list[float], list[dict]]] = {}
    for e in sorted(by_f(history, "member-view"), key=lambda e: e["t"]):
        ts, vs = out.setdefault(e["node"], ([], []))
        leases = e["value"].get("leases", {})
        ts.append(e["t"])
        vs.append({n: (s, leases.get(n, 0)) for n, s in e["value"]["members"].items()})
    return out


def _gating(views: tuple[list[float], list[dict]] | None, t_inv: float, t_ok: float) -> dict[str, int] | None:
    """Members (name -> start) certainly gating a pull served by this copy in [t_inv, t_ok]: in
    every view it held in that window, under one lease (0: a config worker not registered yet,
    the same member as its first lease); None when it held none (no evidence)."""
    if views is None:
        return None
    ts, vs = views
    lo = max(0, bisect_right(ts, t_inv) - 1)
    if not ts or ts[lo] > t_ok:
        return None
    held = vs[lo:bisect_right(ts, t_ok)]
    out = {}
    for n in set(held[0]).intersection(*held[1:]):
        if len({v[n][1] for v in held} - {0}) > 1:
            continue            # two incarnations in the window: neither surely gated the pull
        out[n] = min(v[n][0] for v in held)
    return out


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


def _invoked_clocks(history: list[dict]) -> dict[tuple[str, int], tuple[list[float], list[int]]]:
    """Per (worker, shard): push invoke times and the highest clock invoked up to each."""
    return clock_series(by_f(history, "push", "invoke"), lambda v: (v["worker"], v.get("shard", 0)))


def _judge_step(w: str, s: int, t: float, shards: list[int], pulls, views, clocks, tau: int):
    """One step: ("unjudged", why) | ("solo", None) | ("compared", [(other, done, lead)]).
    Each shard's pull is judged on its own: the other's push of clock >= s-tau-1 to that shard
    must have been invoked before that pull's ok (the copy served it only once it had applied it)."""
    leads, me = [], False
    for k in shards:
        ts, ps = pulls.get((w, k), ([], []))
        i = bisect_right(ts, t)
        if not i:
            return "unjudged", f"no gated pull from shard {k} before the step ended"
        t_ok, t_inv, node = ps[i - 1]
        got = _gating(views.get(node), t_inv, t_ok)
        if got is None:
            return "unjudged", f"shard {k}'s pull was served by {node or 'an unnamed copy'}, which recorded no member-view"
        me = me or w in got
        for other, start in sorted(got.items()):
            if other == w:
                continue
            cts, best = clocks.get((other, k), ([], []))
            j = bisect_left(cts, t_ok)             # invokes strictly before the pull's ok
            done = max(best[j - 1] if j else -1, start - 1)
            leads.append((other, k, done, s - done - 1))
    if leads:
        return "compared", leads
    if me:
        return "solo", None
    return "unjudged", "no member certainly gated the step's pulls (an empty generation, or one without it)"


def staleness(history: list[dict], ctx: dict) -> Verdict:
    """BSP/SSP(tau): when a worker's pull of step s was served by a shard, every member that
    surely gated it had invoked its push of clock s-tau-1 to that shard, or joined at a start of
    at least s-tau; no worker pushed after the record dropped it; every joiner's start lies within
    the clocks pushed by then (members_vs_workers.py).

    A step whose pulls no other member gated (a worker alone in its generation) compares nothing:
    it is counted `solo`, and a run with no compared step is unknown.
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
    worst, bad, unjudged, compared, solo = 0, [], [], 0, 0
    for e in steps:
        w, s, t = e["value"]["worker"], e["value"]["step"], e["t"]
        kind, got = _judge_step(w, s, t, shards, pulls, views, clocks, tau)
        if kind == "unjudged":
            unjudged.append({"worker": w, "step": s, "t": round(t, 4), "why": got})
            continue
        if kind == "solo":
            solo += 1
            continue
        compared += 1
        for other, k, done, lead in got:
            worst = max(worst, lead)
            if lead > tau:
                bad.append({"worker": w, "step": s, "shard": k, "other": other, "other_clock": done, "lead": lead})
    outside = pushes_outside_membership(history)
    joins = join_violations(history, ctx)
    details = {"mode": mode, "tau": tau, "max_lead": worst, "violations": bad[:10], "violation_count": len(bad),
               "steps_compared": compared, "steps_solo": solo, "steps_unjudged": len(unjudged),
               "pushes_outside_membership": outside[:10], "outside_count": len(outside),
               "join_start_violations": joins[:10]}
    if bad or outside or joins:
        return Verdict(False, details)
    if unjudged:
        return unknown(f"{len(unjudged)} step(s) had no gated pull a member-view covers: their barrier is unknown",
                       example=unjudged[0], **details)
    if not compared:
        return unknown("no step was gated by another member: there was nobody to compare against", **details)
    return Verdict(True, details)


# ------------------------------------------------------------------------------ barrier-live
def _losses(history: list[dict]) -> list[dict]:
    """Faults that took workers out of the barrier: (victims, start, end) where end is the heal
    (None: never). A worker cut off from etcd counts: it stops stepping once its lease may have
    expired, and the barrier must drop it rather than wait."""
    stops = {e["value"].get("index"): e["t"] for e in by_f(history, "fault-stop")}
    out = []
    for e in by_f(history, "fault-start"):
        v = e["value"]
        kind, target = v.get("kind"), str(v.get("target", ""))
        cut = CUT_FROM_ETCD.match(target.strip()) if kind == "partition" else None
        if kind in LOSS_KINDS and target.startswith("worker-"):
            out.append({"kind": kind, "victims": [target], "t": e["t"], "healed": stops.get(v.get("index"))})
        elif cut:
            out.append({"kind": "cut-from-etcd", "victims": [cut.group(1) or cut.group(2)], "t": e["t"],
                        "healed": stops.get(v.get("index"))})
        elif kind == "scale-in" and v.get("removed"):
            out.append({"kind": kind, "victims": list(v["removed"]), "t": e["t"], "healed": None})
    return out


def _active_until(history: list[dict], workers: set[str], end: float) -> float:
    """When the last of `workers` stopped training: its train-done, or its last event; a worker
    whose last event is a gated pull still waiting was held to the end of the run."""
    last: dict[str, dict] = {}
    for e in history:
        w = e.get("node")
        if w in workers and (w not in last or e["t"] >= last[w]["t"]):
            last[w] = e
    out = 0.0
    for w in workers:
        e = last.get(w)
        if e is None:
            continue
        waiting = e.get("f") == "pull" and e.get("type") == "invoke" and e["value"].get("min_clock", -1) >= 0
        out = max(out, end if waiting else e["t"])
    return out


def barrier_live(history: list[dict], ctx: dict) -> Verdict:
    """A worker that dies, leaves or is cut off from etcd does not hold the BSP/SSP barrier: after
    each such loss the others' longest gap between steps (the stall, from the loss until its heal
    or their end) stays within member_ttl_s + GRACE_S (a graceful stop or scale-in: GRACEFUL_S).

    A loss whose window is shorter than that bound cannot tell a live barrier from one that
    waited: it is not judged. No loss at all: nothing to judge (unknown). Gated pulls that timed
    out are reported, not judged: a live member may hold a barrier correctly (cut from one shard).
    """
    mode = ctx.get("training", "async")
    if mode == "async":
        return unknown("training is async: there is no barrier (use bsp or ssp)")
    steps = sorted(by_f(history, "train-step"), key=lambda e: e["t"])
    if not steps:
        return unknown("no worker finished a step: nothing to judge")
    timed_out = [{"worker": e["value"].get("worker"), "shard": e["value"].get("shard"),
                  "min_clock": e["value"].get("min_clock"), "t": round(e["t"], 4)}
                 for e in by_f(history, "pull", "fail") if e["value"].get("min_clock", -1) >= 0]
    ttl = ctx.get("member_ttl_s")
    end = max(e["t"] for e in history)
    stalls, unjudged = [], []
    losses = _losses(history)
    for loss in losses:
        t0, t1 = loss["t"], loss["healed"] if loss["healed"] is not None else end
        others = {e["value"]["worker"] for e in steps} - set(loss["victims"])
        t1 = min(t1, _active_until(history, others, end))
        bound = GRACEFUL_S if loss["kind"] in GRACEFUL else (ttl or 0) + GRACE_S
        if (ttl is None and loss["kind"] not in GRACEFUL) or t1 - t0 < bound:
            unjudged.append({**loss, "why": f"over {round(t1 - t0, 3)} s, under the {bound} s it takes to tell "
                                            f"(member_ttl_s {ttl} + {GRACE_S})"})
            continue
        times = [e["t"] for e in steps if e["value"]["worker"] in others and t0 <= e["t"] <= t1]
        edges = [t0, *times, t1]
        stall = max(b - a for a, b in zip(edges, edges[1:]))
        stalls.append({"kind": loss["kind"], "victims": loss["victims"], "t": round(t0, 4), "until": round(t1, 4),
                       "stall_s": round(stall, 4), "bound_s": bound, "held": stall > bound})
    held = [s for s in stalls if s["held"]]
    details = {"mode": mode, "member_ttl_s": ttl, "grace_s": GRACE_S, "stalls": stalls, "held_by_lost_worker": held,
               "gated_pull_failures": timed_out[:10], "gated_pull_failure_count": len(timed_out),
               "not_judged": unjudged}
    if held:
        return Verdict(False, details)
    if not losses:
        return unknown("no worker was lost (killed, stopped, paused, scaled in or cut off from etcd): "
                       "nothing to judge", **details)
    if not stalls:
        return unknown("every worker loss was too short to tell a live barrier from one that waited", **details)
    return Verdict(True, details)
