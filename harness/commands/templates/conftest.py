"""The pschaos pytest plugin's two hooks, as a suite's conftest.py uses them.

pytest calls a conftest's hook only by its `pytest_` name: these two are pschaos'.
"""
import json
import os
from pathlib import Path

REPORTS = Path(os.environ.get("PSCHAOS_SEEN", "out/pschaos-seen.jsonl"))


def pytest_pschaos_modify_scenario(scenario, config):
    """A smoke run (PSCHAOS_SMOKE=1): every scenario with a shorter workload."""
    if os.environ.get("PSCHAOS_SMOKE") and scenario.workload.steps:
        scenario.workload.steps = min(scenario.workload.steps, 100)


def pytest_pschaos_report(report, item):
    """Every scenario's report as it lands: here, one line per run (upload it, or gate on it)."""
    REPORTS.parent.mkdir(parents=True, exist_ok=True)
    with REPORTS.open("a") as f:
        f.write(json.dumps({"test": item.nodeid, "scenario": report["scenario"], "verdict": report["verdict"],
                            "seed": report["seed"], "backend": report["backend"]}) + "\n")
