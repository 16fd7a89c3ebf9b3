"""A library scenario end to end through the CLI (process backend): the report's keys, the rerun
command, the host-speed probe and the offline re-judging; exit codes 1 and 2. What a library
scenario's own checks prove (replica-restart-catchup's catch-up by delta, its bytes against the
changes and the snapshot) is proved by its run in the library pass, not run again here."""
import json
import subprocess
import sys

import pytest

from pschaos.harness.machinery.tools import REPO

KEYS = {"schema", "scenario", "backend", "seed", "verdict", "rerun", "checks", "metrics", "faults"}
METRICS = {"acked_updates", "lost_acked_updates", "failovers", "failover_ms", "sync_bytes", "changed_bytes",
           "snapshot_bytes", "final_loss"}


def run(scenario: str, tmp_path, seed: int = 3):
    out = tmp_path / scenario
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(REPO / "scenarios" / f"{scenario}.yaml"),
                        "--backend", "process", "--seed", str(seed), "--out", str(out)],
                       capture_output=True, text=True, timeout=400, cwd=REPO)
    rep = json.loads((out / "report.json").read_text())
    return p, rep


def test_kill_primary(tmp_path):
    p, rep = run("kill-primary", tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert KEYS <= set(rep) and METRICS <= set(rep["metrics"]) and rep["verdict"] == "pass"
    m = rep["metrics"]
    assert m["lost_acked_updates"] == 0 and m["failovers"] >= 1 and m["acked_updates"] > 0
    assert rep["faults"][0]["kind"] == "kill" and rep["faults"][0]["target"].startswith("shard-0/")
    assert rep["rerun"].endswith("--backend process --seed 3")
    assert (tmp_path / "kill-primary" / "history.jsonl").stat().st_size > 0
    # the host's speed over the training window (harness/machinery/hostspeed.py): several samples of a real run
    load = rep["host_load"]
    assert load["probe_ms"] > 0 and load["probe_samples"] >= 4 and "probe_unknown" not in load, load
    # the same checks, re-judged offline from the saved history alone, agree with the run
    c = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "check", str(tmp_path / "kill-primary"), "--json"],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    offline = json.loads(c.stdout)
    assert c.returncode == 0 and offline["verdict"] == rep["verdict"]
    assert {k: v["valid"] for k, v in offline["checks"].items()} == {k: v["valid"] for k, v in rep["checks"].items()}
    assert offline["checks"]["no-lost-acks"]["details"] == rep["checks"]["no-lost-acks"]["details"]


def test_failing_expectation_exits_1_with_the_rerun_command(tmp_path):
    text = (REPO / "scenarios" / "kill-primary.yaml").read_text().replace("steps: 300", "steps: 60").replace(
        "step: 100", "step: 20").replace('"failovers >= 1"', '"failovers >= 5"')
    sc = tmp_path / "kill-primary.yaml"
    sc.write_text(text)
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(sc), "--seed", "4", "--out",
                        str(tmp_path / "o")], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert p.returncode == 1, p.stdout + p.stderr[-2000:]
    assert "FAIL kill-primary" in p.stdout and "metric-bounds" in p.stdout and "--seed 4" in p.stdout


@pytest.mark.parametrize("bad,words", [("kind: kill", "faults[0].kind")])
def test_malformed_scenario_exits_2(tmp_path, bad, words):
    sc = tmp_path / "x.yaml"
    sc.write_text((REPO / "scenarios" / "kill-primary.yaml").read_text().replace(bad, "kind: melt"))
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(sc)], capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    assert p.returncode == 2 and words in p.stderr and f"{sc}:" in p.stderr
