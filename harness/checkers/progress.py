"""progress: the workload kept going, or the run says who stopped it.

The runner watches the acknowledged steps while it drives (harness/run/stall.py) and ends a
run whose workload went quiet for longer than `workload.stall_s` after the last heal. This check
passes on the watch's own record (`progress-watch`: how often it looked, how many steps it saw,
the longest quiet time) and fails on a `workload-stall`, with who was waiting for what when the
run was stopped: each stepping process's last step, and the calls it had in flight (a barrier
pull's min_clock, a shard it waited on). No watch on record is unknown, never a pass.
"""
from __future__ import annotations

from pschaos.harness.checkers.base import Verdict, by_f

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
             **{k: v for k, v in (e.get("value") or {}).items() if k in ("shard", "min_clock", "step", "key", "to")}}
            for e in shown]
    return dict(sorted(out.items()))


def workload_progress(history: list[dict], ctx: dict) -> Verdict:
    stalls = by_f(history, "workload-stall")
    if stalls:
        s = stalls[0]
        return Verdict(False, {**s["value"], "waiting": who_waits(history, s["t"])})
    watch = by_f(history, "progress-watch")
    if not watch:
        return Verdict("unknown", {"reason": "the run recorded no progress watch: nothing shows whether the "
                                             "workload kept going (a history from an older pschaos, or the run "
                                             "stopped before it trained)"})
    if not watch[-1]["value"].get("steps_seen"):
        return Verdict("unknown", {**watch[-1]["value"], "reason": "the watch saw no acknowledged step: the "
                                                                    "workload never went, so nothing shows it kept going"})
    return Verdict(True, watch[-1]["value"])
