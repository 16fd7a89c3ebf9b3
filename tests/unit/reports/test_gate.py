"""Release gates: pass, fail with named violations, malformed files with line and field."""
import json
import shutil
import subprocess
import sys

import pytest

from pschaos.harness.machinery.tools import REPO
from pschaos.reports.gate import GateFileError, evaluate, gather, load_gate


def run_dir(tmp_path, name, i, verdict="pass", p99=400.0, lost=0, checks=None):
    d = tmp_path / f"{name}-{i}"
    d.mkdir()
    checks = checks or {"no-lost-acks": {"valid": True}, "single-primary": {"valid": True}}
    (d / "report.json").write_text(json.dumps({
        "scenario": name, "seed": i, "verdict": verdict, "checks": checks,
        "metrics": {"lost_acked_updates": lost, "failover_ms": {"p50": p99 / 2, "p99": p99, "max": p99}}}))
    return d


def gate_file(tmp_path, text):
    p = tmp_path / "gate.yaml"
    p.write_text(text)
    return p


GATE = """all:
  checks: [single-primary]
  metrics: ["lost_acked_updates == 0"]
scenarios:
  kill-primary:
    metrics: ["failover_ms.p99 <= 800", "pass_rate >= 0.95"]
"""


def test_gate_holds(tmp_path):
    for i in range(3):
        run_dir(tmp_path, "kill-primary", i)
    assert evaluate(load_gate(gate_file(tmp_path, GATE)), gather([tmp_path])[0]) == []


def test_violations_name_scenario_metric_bound_and_value(tmp_path):
    run_dir(tmp_path, "kill-primary", 0, p99=912.5)
    run_dir(tmp_path, "kill-primary", 1, verdict="fail", lost=2)
    out = evaluate(load_gate(gate_file(tmp_path, GATE)), gather([tmp_path])[0])
    text = "\n".join(out)
    assert "kill-primary: failover_ms.p99 = 912.5 violates failover_ms.p99 <= 800" in text
    assert "kill-primary: lost_acked_updates = 2 violates lost_acked_updates == 0" in text
    assert "kill-primary: pass_rate = 0.500 violates pass_rate >= 0.95 (2 runs)" in text


def test_missing_check_and_missing_scenario(tmp_path):
    run_dir(tmp_path, "other", 0, checks={"no-lost-acks": {"valid": True}})
    out = evaluate(load_gate(gate_file(tmp_path, GATE)), gather([tmp_path])[0])
    assert any("other: check single-primary is required but was not run" in o for o in out)
    assert any("kill-primary: the gate names this scenario but no run" in o for o in out)


@pytest.mark.parametrize("text,where", [
    ("all:\n  metrics: ['failover_ms.p99 about 800']\n", ":2: all.metrics[0]"),
    ("all:\n  checkz: [x]\n", ":2: all.checkz"),
    ("scenarios:\n  kp:\n    metrics: [x <]\n", ":3: scenarios.kp.metrics[0]"),
    ("gates: 1\n", ":1: gates"),
    ("all: [\n", ":2"),
])
def test_malformed_gate_names_line_and_field(tmp_path, text, where):
    with pytest.raises(GateFileError) as e:
        load_gate(gate_file(tmp_path, text))
    assert where in str(e.value)


def test_cli_exit_codes(tmp_path):
    run_dir(tmp_path, "kill-primary", 0)
    good, bad = gate_file(tmp_path, GATE), tmp_path / "bad.yaml"
    bad.write_text("all:\n  metrics: [nope]\n")
    cli = [sys.executable, "-m", "pschaos.harness.commands.cli", "gate", str(tmp_path)]
    assert subprocess.run(cli + ["--gate", str(good)], capture_output=True, cwd=REPO).returncode == 0
    r = subprocess.run(cli + ["--gate", str(bad)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "bad.yaml:2: all.metrics[0]" in r.stderr
    run_dir(tmp_path, "kill-primary", 1, p99=5000)
    r = subprocess.run(cli + ["--gate", str(good)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 1 and "GATE FAIL kill-primary: failover_ms.p99 = 5000" in r.stdout


def test_shipped_release_gate_is_valid():
    g = load_gate(REPO / "scenarios" / "gates" / "release.yaml")
    assert "kill-primary" in g.scenarios


def gate_cli(*args: str) -> tuple[int, str]:
    """`pschaos gate ...` in-process: its exit code and everything it printed."""
    import contextlib
    import io

    from pschaos.harness.commands.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = main(["gate", *args])
    return rc, out.getvalue()


def test_a_corrupt_report_fails_the_gate_closed(tmp_path):
    """A report.json the gate cannot read is missing evidence: exit 2 naming the folder, never a
    pass over the runs it could read (it used to skip the file and pass)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    run_dir(runs, "kill-primary", 1)
    bad = run_dir(runs, "kill-primary", 2)
    (bad / "report.json").write_text('{"scenario": "kill-primary", "verd')
    rc, out = gate_cli(str(runs), "--gate", str(gate_file(tmp_path, GATE)))
    assert rc == 2 and str(bad) in out and "report.json" in out, out


def test_a_run_that_left_no_report_fails_the_gate_closed(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    run_dir(runs, "kill-primary", 1)
    crashed = runs / "kill-primary-2"
    (crashed / "run" / "events").mkdir(parents=True)        # a run started here and never wrote its report
    rc, out = gate_cli(str(runs), "--gate", str(gate_file(tmp_path, GATE)))
    assert rc == 2 and str(crashed) in out, out
    shutil.rmtree(crashed)
    died = runs / "kill-primary-3"                            # died in its backend's start: only the runner's marker
    (died / "run").mkdir(parents=True)
    (died / "run" / ".pschaos-run").write_text("run-id\n")
    rc, out = gate_cli(str(runs), "--gate", str(gate_file(tmp_path, GATE)))
    assert rc == 2 and str(died) in out, out
    rc, out = gate_cli(str(tmp_path / "nowhere"), "--gate", str(gate_file(tmp_path, GATE)))
    assert rc == 2 and "nowhere" in out, out


def test_an_unknown_run_is_exit_3_not_a_pass(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    run_dir(runs, "kill-primary", 1)
    run_dir(runs, "other", 2, verdict="unknown")
    rc, out = gate_cli(str(runs), "--gate", str(gate_file(tmp_path, "all:\n  metrics: [\"lost_acked_updates == 0\"]\n")))
    assert rc == 3 and "unknown" in out and "other" in out, out


def test_a_malformed_number_in_a_bound_is_exit_2_with_its_line(tmp_path):
    run_dir(tmp_path, "kill-primary", 1)
    g = gate_file(tmp_path, "all:\n  metrics:\n    - \"failover_ms.p99 <= 1.2.3\"\n")
    rc, out = gate_cli(str(tmp_path), "--gate", str(g))
    assert rc == 2 and f"{g}:3" in out and "1.2.3" in out, out


def test_a_runs_fault_free_run_is_not_a_run_of_the_suite(tmp_path):
    """Review: every baseline/report.json was gathered as a run of its scenario, so passing
    fault-free copies could lift a failing scenario's pass rate."""
    run_dir(tmp_path, "kill-primary", 0, verdict="fail", lost=2)
    for i in range(3):
        base = tmp_path / "kill-primary-0" / f"baseline{i}"
        base.mkdir()
        (base / "report.json").write_text(json.dumps({"scenario": "kill-primary", "seed": 0, "verdict": "pass",
                                                      "made_for": "kill-primary", "checks": {}, "metrics": {}}))
    runs, problems = gather([tmp_path])
    assert [r["verdict"] for _, r in runs] == ["fail"] and problems == []
