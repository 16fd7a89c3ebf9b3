"""Goodput of a training job: how much of its wall time went into steps that survive into the model.

ETTR (effective training time ratio) = the time spent on the steps the final model holds, each
step's time counted from the end of the step before it in the same incarnation (or from its
resume), over the wall time from the first process start to the final model. Steps redone
after a restart count once, the surviving time; setup, recovery and the lost work do not.
Goodput is surviving steps per second of that wall time. None when the job never finished.
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
