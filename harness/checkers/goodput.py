"""Goodput: how much of a training run's wall time went into steps that survive into the model.

ETTR (effective training time ratio) = the time spent on the steps the final model holds, each
step's time counted from the end of the step before it in the same incarnation (or from its
resume), over the wall time from the first process start to the final model. Steps redone
after a restart count once, the surviving time; setup, recovery and the lost work do not.
Goodput is surviving steps per second of that wall time. None when the job never finished.

psnodes' workers (`psnodes_goodput`) push every step's update and never roll back: a step
survives when its pushes were acknowledged and kept. Each worker's step time runs from its
step before (or from that process's first call), over each worker's span from its first call
to its last step; a killed worker's downtime and its restart's setup are in the span, not in
the steps. Acknowledged updates the model lost (no-lost-acks) take their share of the steps
away. None when the history has no step or no finished worker.
"""
from __future__ import annotations

from pschaos.harness.checkers.base import by_f


def job_goodput(history: list[dict]) -> dict:
    finals = by_f(history, "job-final")
    starts = by_f(history, "job-start")
    if not finals or not starts:
        return {"ettr": None, "goodput": None, "surviving_steps": None, "restarts": None}
    node = finals[-1]["value"]["worker"]           # every rank holds the same lineage; one is read
    prev: dict[str, float] = {}
    for e in by_f(history, "job-resume"):
        if e["node"] == node:
            prev.setdefault(e["value"]["incarnation"], e["t"])
    last_ok: dict[int, float] = {}                 # step -> its surviving (latest) ack's duration
    for e in by_f(history, "step", "ok"):
        if e["node"] != node:
            continue
        inc = e["value"]["incarnation"]
        start = prev.get(inc, e["t"])
        last_ok[e["value"]["step"]] = e["t"] - start
        prev[inc] = e["t"]
    wall = max(e["t"] for e in finals) - min(e["t"] for e in starts)
    useful = sum(last_ok.values())
    return {"ettr": round(useful / wall, 4) if wall > 0 else None,
            "goodput": round(len(last_ok) / wall, 3) if wall > 0 else None,
            "surviving_steps": len(last_ok),
            "restarts": len({e["value"]["incarnation"] for e in starts}) - 1}


def psnodes_goodput(history: list[dict], lost: int | None, acked: int) -> dict:
    steps = by_f(history, "train-step")
    if not steps or not by_f(history, "train-done") or lost is None:
        return {"ettr": None, "goodput": None, "surviving_steps": None}
    first: dict[tuple, float] = {}               # (worker, pid) -> its first call's time
    for e in history:
        if e.get("f") in ("pull", "push") and e.get("type") == "invoke":
            first.setdefault((e["node"], e.get("pid")), e["t"])
    prev: dict[tuple, float] = {}
    span: dict[str, list[float]] = {}
    useful = 0.0
    for e in sorted(steps, key=lambda e: e["t"]):
        key = (e["node"], e.get("pid"))
        start = prev.get(key, first.get(key, e["t"]))
        useful += e["t"] - start
        prev[key] = e["t"]
        lo_hi = span.setdefault(e["node"], [first.get(key, e["t"]), e["t"]])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], start), max(lo_hi[1], e["t"])
    kept = 1.0 - (lost / acked if acked else 0.0)
    wall = sum(hi - lo for lo, hi in span.values())
    run = max(hi for _, hi in span.values()) - min(lo for lo, _ in span.values())
    return {"ettr": round(useful * kept / wall, 4) if wall > 0 else None,
            "goodput": round(len(steps) * kept / run, 3) if run > 0 else None,
            "surviving_steps": round(len(steps) * kept)}
