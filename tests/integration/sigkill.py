"""SIGKILL a harness mid-run, `pschaos clean`, and check nothing of the run is left; shared by
the psnodes and the adapted-system tests of `pschaos clean`."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from pschaos.harness.machinery.procs import tagged_processes, wait_until
from pschaos.harness.machinery.tools import REPO
from pschaos.netfaults.nft import delete_table, tables


def start_run(scenario_text: str, tmp_path: Path, name: str) -> subprocess.Popen:
    """`pschaos run` of this scenario as a process of its own, its output under tmp_path/out."""
    sc = tmp_path / f"{name}.yaml"
    sc.write_text(scenario_text)
    return subprocess.Popen([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(sc), "--out", str(tmp_path / "out"),
                             "--quiet"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def await_fault(tmp_path: Path, timeout: float = 60) -> str:
    """The run's id, once its first fault began (AssertionError when none did in time)."""
    hist = tmp_path / "out" / "run" / "events" / "harness.jsonl"
    assert wait_until(lambda: hist.exists() and "fault-start" in hist.read_text(), timeout, 0.1), \
        "the run never reached its fault"
    return json.loads(hist.read_text().splitlines()[0])["value"]["run_id"]


def run_tables(run_id: str) -> list[str]:
    return [t for t in tables() if run_id.replace("-", "_") in t]


def sigkill_then_clean(harness: subprocess.Popen, run_id: str) -> None:
    harness.send_signal(signal.SIGKILL)
    harness.wait(10)
    r = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "clean"], cwd=REPO, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    time.sleep(0.2)
    assert tagged_processes(run_id) == []
    assert not run_tables(run_id)


def reap_run(harness: subprocess.Popen, run_id: str | None) -> None:
    """Whatever a failed assertion left: reap it, never leak it."""
    if harness.poll() is None:
        harness.kill()
    if run_id is not None:
        for p in tagged_processes(run_id):
            p.kill()
        for t in run_tables(run_id):
            delete_table(t)
