"""progress: the workload kept going, or the run says who stopped it.

The runner watches the acknowledged steps while it drives (harness/run/stall.py) and ends a
run whose workload, or one running worker of it (`stuck` names them), went quiet for longer than
`workload.stall_s` after the last heal. This check
passes on the watch's own record (`progress-watch`: how often it looked, how many steps it saw,
the longest quiet time) and fails on a `workload-stall`, with who was waiting for what when the
run was stopped: each stepping process's last step, and the calls it had in flight (a barrier
pull's min_clock, a shard it waited on), and for each barrier a pull waits at, its members,
their clocks and the ones holding it. No watch on record is unknown, never a pass.
"""
from __future__ import annotations

from pschaos.harness.checkers.base import Verdict, by_f, unknown

STEP_FS = ("train-step", "workload-step")
IN_FLIGHT_SHOWN = 4        # per process, newest first: enough to see whom it waits on


def _is_step(e: dict) -> bool:
    return e.get("f") in STEP_FS or (e.get("f") == "step" and e.get("type") == "ok")


def who_waits(history: list[dict], until: float) -> dict[str, dict]:
    """Per process that acknowledged steps: its last step and when, and the calls it had invoked
    and not seen answered by `until`."""
    out: dict[str, dict] = {}
    open_ops: dict[str, dict[str, dict]] = {}
    for e in history:
        if e.get("t", 0) > until:
            break
        node = e.get("node") or (e.get("value") or {}).get("worker")
        if not node:
            continue
        if _is_step(e):
            out.setdefault(node, {})
            out[node].update(step=(e.get("value") or {}).get("step"), step_t=round(e["t"], 3))
        op = e.get("op_id")
        if op is None:
            continue
        if e.get("type") == "invoke":
            open_ops.setdefault(node, {})[op] = e
        else:
            open_ops.get(node, {}).pop(op, None)
    for node, ops in open_ops.items():
        if node not in out and not ops:
            continue
        shown = sorted(ops.values(), key=lambda e: -e["t"])[:IN_FLIGHT_SHOWN]
        out.setdefault(node, {})["in_flight"] = [
            {"f": e["f"], "since_s": round(until - e["t"], 3),
             **{k: v for k, v in (e.get("value") or {}).items()
                if k in ("shard", "min_clock", "clock", "step", "key", "to")}}
            for e in shown]
    return dict(sorted(out.items()))


def barriers(history: list[dict], until: float, waiting: dict[str, dict]) -> dict[str, dict]:
    """Per shard whose barrier a waiting pull is held at: the members its copies gate by (the last
    `member-view` before `until`: generation and each member's start), each member's clock as the
    shard knows it (its start until an acknowledged push carried a higher one: psnodes/core/
    membership.py clock_of), the floor, and the members below the clock the pulls wait for."""
    views: dict[int, dict] = {}
    clocks: dict[tuple[int, str], int] = {}
    for e in history:
        if e.get("t", 0) > until:
            break
        v = e.get("value") or {}
        if e.get("f") == "member-view" and "shard" in v:
            views[v["shard"]] = v
        elif e.get("f") == "push" and e.get("type") == "ok" and isinstance(v.get("clock"), int):
            key = (v.get("shard"), v.get("worker"))
            clocks[key] = max(clocks.get(key, v["clock"]), v["clock"])
    need: dict[int, dict[str, int]] = {}
    for who, w in waiting.items():
        for call in w.get("in_flight", []):
            if call.get("f") == "pull" and isinstance(call.get("min_clock"), int) and call["min_clock"] >= 0:
                need.setdefault(call["shard"], {})[who] = call["min_clock"]
    out = {}
    for shard, pulls in sorted(need.items()):
        view = views.get(shard)
        if view is None:
            out[str(shard)] = {"waits": pulls, "members": "unknown: no copy recorded a member-view"}
            continue
        members = {w: max(start, clocks.get((shard, w), 0)) for w, start in sorted(view["members"].items())}
        out[str(shard)] = {"generation": view.get("generation"), "members": members,
                           "floor": min(members.values(), default=None),
                           "waits": {who: {"min_clock": c, "held_by": sorted(w for w, m in members.items() if m < c)}
                                     for who, c in sorted(pulls.items())}}
    return out


def workload_progress(history: list[dict], ctx: dict) -> Verdict:
    stalls = by_f(history, "workload-stall")
    if stalls:
        s = stalls[0]
        waiting = who_waits(history, s["t"])
        held = barriers(history, s["t"], waiting)
        return Verdict(False, {**s["value"], "waiting": waiting, **({"barriers": held} if held else {})})
    timeouts = by_f(history, "workload-timeout")
    if timeouts:       # still stepping at the limit (a stall would have been caught): not shown to go on
        t = timeouts[0]
        return unknown(f"the workload was still running at its time limit ({t['value'].get('limit_s')} s): "
                       "slow, not shown stalled, and not shown to finish", **t["value"],
                       waiting=who_waits(history, t["t"]))
    watch = by_f(history, "progress-watch")
    if not watch:
        return Verdict("unknown", {"reason": "the run recorded no progress watch: nothing shows whether the "
                                             "workload kept going (a history from an older pschaos, or the run "
                                             "stopped before it trained)"})
    if not watch[-1]["value"].get("steps_seen"):
        return Verdict("unknown", {**watch[-1]["value"], "reason": "the watch saw no acknowledged step: the "
                                                                    "workload never went, so nothing shows it kept going"})
    return Verdict(True, watch[-1]["value"])
