"""pschaos soak end to end: two seeds of kill-primary as real `pschaos run` subprocesses, aggregated."""
import json
import subprocess
import sys

import pytest

from pschaos.harness.machinery.tools import REPO, find

CLI = [sys.executable, "-m", "pschaos.harness.commands.cli"]


def test_soak_two_seeds_of_kill_primary(tmp_path):
    if find("etcd") is None:
        pytest.skip("etcd is not installed (apt-get install etcd-server, or make install)")
    out = tmp_path / "soak"
    p = subprocess.run(CLI + ["soak", "kill-primary", "--seeds", "2", "--first-seed", "3", "-j", "2",
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


def test_sim_soak_forks_each_run_from_a_warm_process_and_keeps_its_isolation(tmp_path):
    """On --backend sim each run is forked (harness/proof/soak/fork.py): it still writes its own report
    and log, runs in its own session, and a seed's run is the same as `pschaos run`'s."""
    out = tmp_path / "soak"
    p = subprocess.run(CLI + ["soak", "kill-primary", "--backend", "sim", "--seeds", "2", "-j", "2",
                              "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=REPO)
    a = json.loads((out / "soak.json").read_text())
    assert p.returncode == 0 and a["verdicts"]["pass"] == 2, p.stdout + p.stderr
    for s in (1, 2):
        rep = json.loads((out / f"seed-{s}" / "report.json").read_text())
        assert rep["seed"] == s and rep["backend"] == "sim" and rep["verdict"] == "pass"
        assert "PASS kill-primary seed=%d" % s in (out / f"seed-{s}" / "soak-run.log").read_text()
    single = tmp_path / "single"
    subprocess.run(CLI + ["run", str(REPO / "scenarios" / "kill-primary.yaml"), "--backend", "sim", "--seed", "2", "--out", str(single), "--quiet"],
                   capture_output=True, text=True, timeout=300, cwd=REPO, check=False)
    assert (single / "history.jsonl").read_bytes() == (out / "seed-2" / "history.jsonl").read_bytes()


def test_a_forked_run_that_crashes_is_unknown_not_lost(tmp_path):
    from pschaos.harness.proof.soak.soak import RunResult, judge_run
    from pschaos.harness.proof.soak.fork import ForkedRun

    d = tmp_path / "r"
    d.mkdir()
    (d / "soak-run.log").write_bytes(b"")
    p = ForkedRun(["run", str(tmp_path / "no-such.yaml"), "--backend", "sim", "--out", str(d)], d / "soak-run.log")
    assert p.wait(120) == 2 and p.poll() == 2
    r = judge_run(RunResult(1, 1, d, rc=p.returncode))
    assert r.verdict == "unknown" and "no report.json" in r.reason
    assert "no-such.yaml" in (d / "soak-run.log").read_text()
