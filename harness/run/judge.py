"""Judging a run is a pure function of its history.

Everything the checkers read is in `history.jsonl`: the `run-start` event carries the scenario's
expectations and every context value (replication mode, max_lag, staleness, baseline loss and
margin, grace periods, the schedule's size). So `pschaos check DIR/history.jsonl` re-judges a
saved run offline, with no cluster, and must print the same verdicts as the run did.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pschaos.harness.run import metrics as run_metrics
from pschaos.harness.checkers import CHECKERS, Verdict, compose, run_check
from pschaos.harness.checkers.base import History, by_f
from pschaos.harness.checkers.evidence import nodes_back, scenario_ran
from pschaos.harness.checkers.progress import workload_progress
from pschaos.harness.errors import HarnessError
from pschaos.harness.history.events import read_events

VERDICTS = {True: "pass", False: "fail", "unknown": "unknown"}
EXIT_CODES = {"pass": 0, "fail": 1, "unknown": 3}
EVIDENCE_CHECK = "scenario-ran"


@dataclass
class Judgement:
    checks: dict[str, Verdict]
    metrics: dict
    verdict: str
    ctx: dict
    expect: dict


def run_start(history: list[dict]) -> dict:
    starts = by_f(history, "run-start")
    if not starts:
        raise HarnessError("the history has no run-start event: it is not a whole pschaos run "
                           "(judge the history.jsonl a run wrote, not a node's event file)")
    v = starts[0]["value"]
    if "context" not in v or "expect" not in v:
        raise HarnessError("the run-start event carries no context/expect: the history was written by "
                           "an older pschaos; rerun the scenario to judge it")
    return v


def judge(history: list[dict]) -> Judgement:
    """The checks the scenario named, the evidence check, the metric bounds, and the verdict."""
    history = History(history)
    start = run_start(history)
    ctx, expect = start["context"], start["expect"]
    checks: dict[str, Verdict] = {}
    for name in expect.get("checks", []):
        fn = CHECKERS.get(name)
        checks[name] = run_check(fn, history, ctx) if fn else Verdict(
            "unknown", {"reason": f"no checker named {name!r} in this version of pschaos"})
    if not checks:
        checks["checks"] = Verdict("unknown", {"reason": "the scenario names no check: nothing was judged"})
    checks[EVIDENCE_CHECK] = run_check(scenario_ran, history, ctx)
    checks["nodes-back"] = run_check(nodes_back, history, ctx)
    checks["progress"] = run_check(workload_progress, history, ctx)
    m = run_metrics.compute(history, ctx)
    m["baseline_loss"] = ctx.get("baseline_loss")
    bounds = run_metrics.check_bounds(m, expect.get("metrics", []))
    if bounds:
        v = bounds_verdict(bounds)
        if v.valid is False and checks[EVIDENCE_CHECK].valid is not True:
            # e.g. `failovers >= 1` when the kill was refused: the bound judged a run that did not happen
            v = Verdict("unknown", {"reason": "a metric bound does not hold, but the scenario did not run as "
                                              f"written ({EVIDENCE_CHECK} is {checks[EVIDENCE_CHECK].valid})",
                                    "bounds": bounds})
        checks["metric-bounds"] = v
    return Judgement(checks, m, VERDICTS[compose(checks)], ctx, expect)


def bounds_verdict(bounds: list[dict]) -> Verdict:
    """False when a measured metric breaks its bound; unknown when a metric has no value."""
    if any(b["value"] is not None and not b["holds"] for b in bounds):
        return Verdict(False, {"bounds": bounds})
    absent = [b["metric"] for b in bounds if b["value"] is None]
    if absent:
        return Verdict("unknown", {"reason": f"no value for {', '.join(absent)}", "bounds": bounds})
    return Verdict(True, {"bounds": bounds})


def judge_file(path: Path) -> Judgement:
    if path.is_dir():
        path = path / "history.jsonl"
    if not path.exists():
        raise HarnessError(f"{path}: no such history; give a run's history.jsonl or its folder")
    return judge(read_events(path))
