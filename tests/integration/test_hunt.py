"""pschaos hunt end to end (issue 10): on a planted bug it finds a failing schedule on the
simulator, shrinks it, and writes a scenario that fails again when replayed, while the same
scenario passes on the unmodified code; on the unmodified code a hunt finds nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.machinery.tools import REPO

from .mutants import mutant_copy, run_scenario
from .test_sim_parity import EARLY_ACK

pytestmark = pytest.mark.integration


def _hunt(root, out, *extra, seed: int = 1):
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "hunt", "kill-primary", "--seed", str(seed), "--duration", "8",
                           "--no-confirm", "--out", str(out), "--json", *extra], cwd=root, env=env,
                          capture_output=True, text=True, timeout=1200)


@pytest.mark.timeout(600)     # up to 8 trials, 2 shrink runs and 3 replays on the simulator, on a loaded machine
def test_a_hunt_finds_and_shrinks_a_planted_bug_into_a_scenario_that_replays_it(tmp_path):
    root = mutant_copy(tmp_path / "code", EARLY_ACK)
    # the hunt stops at its first failing trial; which trial exposes the planted bug depends on
    # the failure detector's timing. Seed 2's first trial does today (seed 1 needed five: 118 s of
    # this test against 68 s in CI), and the budget leaves room for more should the timing move
    p = _hunt(root, tmp_path / "hunt", "--budget", "8", "--shrink-budget", "2", seed=2)
    assert p.returncode == 1, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    # an early ack shows as an acked update lost in a failover or as a read of state the ISR did
    # not hold (reads-committed): which one a trial's schedule exposes first depends on the twin's
    # timings (the calibration of 2026-12-07 09:36 found it by reads-committed at seed 2000)
    assert doc["found"] and set(doc["found"]["failed"]) & {"no-lost-acks", "reads-committed"}
    assert 1 <= len(doc["shrunk"]["faults"]) <= len(doc["found"]["faults"]) and 1 <= doc["shrunk"]["runs"] <= 2
    path = tmp_path / "hunt" / f"hunt-kill-primary-{doc['found']['seed']}.yaml"
    assert doc["scenario_file"] == str(path) and load_scenario(path).faults
    assert doc["replayed"]["same_failure"] is True                       # the hunt replayed the file it wrote
    seed = doc["found"]["seed"]
    code, rep, out = run_scenario(root, path, tmp_path / "replay", seed=seed, backend="sim")
    assert code == 1 and rep["verdict"] == "fail", out                 # the bug, replayed from the file
    assert set(doc["found"]["failed"]) & {k for k, v in rep["checks"].items() if v["valid"] is False}
    code, rep, out = run_scenario(REPO, path, tmp_path / "fixed", seed=seed, backend="sim")
    assert code == 0 and rep["verdict"] == "pass", out                 # the schedule alone breaks nothing


def test_a_hunt_on_the_real_code_finds_nothing_and_says_so(tmp_path):
    p = _hunt(REPO, tmp_path / "hunt", "--budget", "2")
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["found"] is None and doc["verdicts"] == {"pass": 2} and (tmp_path / "hunt" / "hunt.json").exists()
