"""pschaos soak end to end: two seeds of kill-primary as real `pschaos run` subprocesses, aggregated."""
import json
import subprocess
import sys

import pytest

from harness.tools import REPO, find

CLI = [sys.executable, "-m", "harness.cli"]


def test_soak_two_seeds_of_kill_primary(tmp_path):
    if find("etcd") is None:
        pytest.skip("etcd is not installed (apt-get install etcd-server, or make install)")
    out = tmp_path / "soak"
    p = subprocess.run(CLI + ["soak", "kill-primary", "--seeds", "2", "--first-seed", "3", "-n", "2",
                              "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=REPO)
    a = json.loads((out / "soak.json").read_text())
    assert a["runs"] == 2 and a["seeds"] == 2 and set(a["per_seed"]) == {"3", "4"}
    assert sum(a["verdicts"].values()) == 2
    assert p.returncode == (1 if a["verdicts"]["fail"] else 3 if a["verdicts"]["unknown"] else 0), p.stdout + p.stderr
    for s in (3, 4):                                      # each run wrote its own report with its own seed
        rep = json.loads((out / f"seed-{s}" / "report.json").read_text())
        assert rep["seed"] == s and rep["scenario"] == "kill-primary"
    assert a["failover_ms"]["n"] >= 2                     # kill-primary kills one primary per run
    assert a["lost_acked_updates"]["per_seed"].keys() == {"3", "4"}
    assert "pschaos soak kill-primary: " in p.stdout and (out / "report.html").exists()
