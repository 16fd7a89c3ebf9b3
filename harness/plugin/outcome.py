"""What a scenario run means as a pytest test: where its reports go, whether its report is as
the scenario expects, and the failure text that shows the failing checks, their evidence and the
rerun command. Shared by the YAML items (plugin.py) and the fixtures (fixtures.py)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest


BASELINES_DIR = ".baselines"      # under --pschaos-out: each session's shared fault-free runs
SHARED_KEY = "pschaos_shared_runs"   # the session's store, handed to xdist workers in workerinput


def out_dir(config: pytest.Config, name: str, seed: int) -> Path:
    worker = getattr(config, "workerinput", {}).get("workerid")   # set only inside an xdist worker
    base = Path(config.getoption("pschaos_out"))
    return base / (f"{name}-{seed}" + (f"-{worker}" if worker else ""))


def baselines(config: pytest.Config):
    """The session's store of fault-free runs (harness/run/shared_runs.py), or None with
    --pschaos-fresh-baselines: every run that needs one makes its own."""
    from pschaos.harness.run.shared_runs import SharedRuns

    if config.getoption("pschaos_fresh_baselines"):
        return None
    root = getattr(config, "workerinput", {}).get(SHARED_KEY) or getattr(config, SHARED_KEY, None)
    return SharedRuns(Path(root)) if root else None


def as_expected(scenario, report: dict) -> bool:
    """A scenario passes as a test when its verdict is pass, or, when it names checks it `finds`
    (a system known to lose acknowledged updates), when exactly those failed, each with failure
    kinds it accepts (by default those a system causes, not a harness misclassification), and
    every other check held: a finding that comes with an unknown, an unexpected failure or a
    missing check is no finding. A check it `may_find` must be decided: pass, or fail as a finding."""
    from pschaos.harness.checkers.updates import SYSTEM_BUG_KINDS

    finds, may = scenario.expect.finds_kinds(), set(scenario.expect.may_find)
    if not finds and not may:
        return report["verdict"] == "pass"
    checks = report["checks"]
    if not (set(finds) | may) <= checks.keys():
        return False

    def found(name: str, c: dict) -> bool:
        accepted = finds.get(name) if finds.get(name) is not None else SYSTEM_BUG_KINDS.get(name)
        kinds = (c.get("details") or {}).get("kinds")
        if accepted is None:           # a check without failure kinds: its failing is the finding
            return c["valid"] is False
        return c["valid"] is False and bool(kinds) and set(kinds) <= set(accepted)

    def holds(name: str, c: dict) -> bool:
        if name in finds:
            return found(name, c)
        if name in may:                # decided either way: never unknown, a failure only as a finding
            return c["valid"] is True or found(name, c)
        return c["valid"] is True

    return all(holds(name, c) for name, c in checks.items())


class ScenarioFailed(Exception):
    """A scenario item's run ended other than its scenario expects; carries the report to explain."""

    def __init__(self, report: dict) -> None:
        super().__init__(report["verdict"])
        self.report = report


def explain(report: dict) -> str:
    expect = (report.get("scenario_spec") or {}).get("expect", {})
    finds = [f if isinstance(f, str) else next(iter(f)) for f in expect.get("finds") or []]
    may = expect.get("may_find") or []
    lines = [f"scenario {report['scenario']} (seed {report['seed']}, {report['backend']}): {report['verdict'].upper()}"
             + (f" (expected to find: {', '.join(finds)} failing, every other check holding)" if finds else "")
             + (f" (may find: {', '.join(may)}: decided either way, never unknown)" if may else "")]
    for name, c in report["checks"].items():
        if c["valid"] is not True:
            lines.append(f"  {name}: {c['valid']}")
            lines.append("    " + json.dumps(c["details"], default=str)[:1500])
    lines.append(f"rerun: {report['rerun']}")
    return "\n".join(lines)
