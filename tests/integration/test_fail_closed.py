"""A run is never pass without evidence: a fault that never came due makes it unknown (exit 3),
and a worker whose kill is healed is seen running again and finishes its whole workload."""
import json
import subprocess
import sys

import pytest

from pschaos.harness.machinery.tools import REPO
from tests.unit.helpers import only_text

pytestmark = pytest.mark.integration

BASE = """\
name: {name}
cluster: {{shards: 1, copies: 2, workers: 1, replication: sync, training: async, model: mlp}}
workload: {{steps: {steps}}}
faults:
  - at: {{step: {at}}}
    kind: kill
    target: {target}
    duration_s: 1.0
expect:
  checks: [no-lost-acks, exactly-once, replicas-match{extra}]
"""


def run(tmp_path, **kw):
    sc = tmp_path / f"{kw['name']}.yaml"
    sc.write_text(only_text(BASE.format(**kw)))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(sc), "--seed", "2", "--out", str(out),
                        "--quiet"], capture_output=True, text=True, timeout=300, cwd=REPO)
    return p, json.loads((out / "report.json").read_text())


def test_a_fault_that_never_came_due_is_unknown(tmp_path):
    p, rep = run(tmp_path, name="never-due", steps=40, at=10_000, target="replica(shard=0)", extra="")
    assert p.returncode == 3, p.stdout + p.stderr[-2000:]
    assert rep["verdict"] == "unknown" and "never came due" in rep["unknown_reasons"]["scenario-ran"]
    junit = (tmp_path / "out" / "junit.xml").read_text()
    assert "scenario-ran" in junit and "CheckUnknown" in junit


def test_a_killed_worker_is_restarted_and_finishes_its_workload(tmp_path):
    """The only worker is killed at step 20 for 1 s: the run waits for the heal, the restarted
    worker trains its 300 steps, and the evidence shows it."""
    p, rep = run(tmp_path, name="kill-only-worker", steps=300, at=20, target="worker-0", extra=", converged")
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    assert rep["checks"]["scenario-ran"]["valid"] is True
    hist = [json.loads(x) for x in (tmp_path / "out" / "history.jsonl").read_text().splitlines()]
    done = [e["value"] for e in hist if e["f"] == "train-done"]
    assert done[-1]["worker"] == "worker-0" and done[-1]["steps"] == 300
    stop = next(e for e in hist if e["f"] == "fault-stop")
    assert stop["value"]["why"] == "scheduled"         # healed on time, not at the end of the run
