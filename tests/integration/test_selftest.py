"""`pschaos selftest --backend sim` end to end, on one mutant and one scenario: the unmodified
code passes the suite first (and the output says so before anything else), then the mutant's
copy fails it and is reported killed, with the scenario, the seed and the failed checks; the
temporary copies are gone afterwards."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pschaos.harness.machinery.tools import REPO

pytestmark = pytest.mark.integration


def _copies() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("pschaos-selftest-*")}


@pytest.mark.timeout(600)
def test_selftest_kills_a_planted_ack_bug_after_the_baseline_passes(tmp_path):
    before = _copies()
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "selftest", "--backend", "sim", "--json",
                        "--mutants", "sync-early-ack", "--scenarios", "partition-primary-replicas",
                        "--out", str(tmp_path / "st"), "--min-score", "1.0"],
                       cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True,
                       timeout=580)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    rep = json.loads(p.stdout)
    assert rep["baseline"]["verdict"] == "pass" and rep["baseline"]["planned"] == 1
    (m,) = rep["mutants"]
    assert m["name"] == "sync-early-ack" and m["status"] == "killed", m
    assert m["killed_by"]["scenario"] == "partition-primary-replicas" and m["killed_by"]["seed"] == 1
    assert "no-lost-acks" in m["killed_by"]["failed_checks"] and m["expected_checker_failed"] is True
    assert rep["score"] == 1.0
    err = p.stderr
    assert err.index("baseline passed") < err.index("sync-early-ack:")     # the baseline is judged first
    assert json.loads((tmp_path / "st" / "selftest.json").read_text())["score"] == 1.0
    assert _copies() <= before                                               # no copy left behind
