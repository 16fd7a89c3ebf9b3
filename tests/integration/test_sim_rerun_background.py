"""A simulated run under a background load or another calibration file says so in its report,
and its rerun line replays the same history (review of the CPU model, M4: `sim validate` gave its
twins the real runs' load, and the rerun line, without it, replayed another history)."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from pschaos.harness.machinery.tools import REPO

SCENARIO = REPO / "scenarios" / "kill-primary.yaml"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", *args, "--quiet"], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


# The plain twin run both tests compare against, made once (the group keeps both on one xdist worker)
pytestmark = pytest.mark.xdist_group("sim-rerun")


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> dict:
    """The run with neither option (seed 2): its history and its report."""
    out = tmp_path_factory.mktemp("plain")
    p = run(str(SCENARIO), "--backend", "sim", "--seed", "2", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    return {"history": (out / "history.jsonl").read_bytes(), "report": json.loads((out / "report.json").read_text())}


def test_the_rerun_line_of_a_loaded_twin_replays_its_history(tmp_path, plain):
    p = run(str(SCENARIO), "--backend", "sim", "--seed", "2", "--background", "0.75", "--out", str(tmp_path / "a"))
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    rep = json.loads((tmp_path / "a" / "report.json").read_text())
    assert rep["simulated"]["background_load"] == 0.75
    assert rep["rerun"].endswith("--background 0.75"), rep["rerun"]
    again = shlex.split(rep["rerun"])[2:]                     # after `pschaos run`
    p = run(*again, "--out", str(tmp_path / "b"))
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    assert (tmp_path / "a" / "history.jsonl").read_bytes() == (tmp_path / "b" / "history.jsonl").read_bytes()
    assert plain["history"] != (tmp_path / "a" / "history.jsonl").read_bytes()


def test_the_rerun_line_of_a_slowed_twin_replays_its_history(tmp_path, plain):
    """--host-slowdown (harness/machinery/hostspeed.py: validate slows each twin by its real run's probe)
    is in the report and the rerun line, and a slower host gives another history."""
    p = run(str(SCENARIO), "--backend", "sim", "--seed", "2", "--host-slowdown", "1.3", "--out", str(tmp_path / "a"))
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    rep = json.loads((tmp_path / "a" / "report.json").read_text())
    assert rep["simulated"]["host_slowdown"] == 1.3
    assert "probe_ms" not in rep["host_load"]         # a sim run reads no host speed: its timings are its calibration's
    assert rep["rerun"].endswith("--host-slowdown 1.3"), rep["rerun"]
    p = run(*shlex.split(rep["rerun"])[2:], "--out", str(tmp_path / "b"))
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    assert (tmp_path / "a" / "history.jsonl").read_bytes() == (tmp_path / "b" / "history.jsonl").read_bytes()
    assert plain["history"] != (tmp_path / "a" / "history.jsonl").read_bytes()
    assert "--host-slowdown" not in plain["report"]["rerun"] and "--background" not in plain["report"]["rerun"]


def test_the_twins_options_are_refused_on_real_processes(tmp_path):
    p = run(str(SCENARIO), "--background", "1", "--out", str(tmp_path / "p"))
    assert p.returncode == 2 and "add --backend sim" in p.stderr
    p = run(str(SCENARIO), "--host-slowdown", "1.2", "--out", str(tmp_path / "q"))
    assert p.returncode == 2 and "add --backend sim" in p.stderr
    for bad in ("0", "-2", "inf", "nan", "auto"):
        p = run(str(SCENARIO), "--backend", "sim", "--host-slowdown", bad, "--out", str(tmp_path / "r"))
        assert p.returncode == 2 and "--host-slowdown" in p.stderr, (bad, p.stderr)
