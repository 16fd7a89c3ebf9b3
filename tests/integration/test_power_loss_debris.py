"""A run with power-loss disks, interrupted: Ctrl-C unmounts every disk and stops every process by
itself; a SIGKILLed harness leaves its disks mounted, and `pschaos clean` unmounts them and reaps
their serving processes."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from pschaos.diskfaults.mounts import available, mounted
from pschaos.harness.machinery.procs import tagged_processes, wait_until
from pschaos.harness.machinery.tools import REPO

from .sigkill import await_fault, reap_run, sigkill_then_clean, start_run

pytestmark = pytest.mark.xdist_group("pschaos-clean")       # `pschaos clean` is machine-wide: one at a time (tests/unit/test_xdist_groups.py)

if available():
    pytest.skip(f"the power-loss disk cannot be mounted here: {available()}", allow_module_level=True)

SCENARIO = """name: NAME
cluster: {shards: 1, copies: 2, workers: 1, model: mlp, checkpoint_interval_s: 0.5}
workload: {steps: 5000}
faults:
  - at: {time: 1.0}
    kind: power-loss
    target: replica(shard=0)
    duration_s: 120
"""


def _disks(tmp_path) -> list:
    return mounted(tmp_path / "out")


def test_a_sigkilled_harness_leaves_its_disks_to_pschaos_clean(tmp_path):
    harness = start_run(SCENARIO.replace("NAME", "killed-disks"), tmp_path, "killed-disks")
    run_id = None
    try:
        run_id = await_fault(tmp_path)
        assert len(_disks(tmp_path)) == 2                    # one per copy, mounted while it runs
        sigkill_then_clean(harness, run_id)
        assert wait_until(lambda: not _disks(tmp_path), 10, 0.1), _disks(tmp_path)
    finally:
        reap_run(harness, run_id)
        for m in _disks(tmp_path):
            subprocess.run(["umount", "-l", str(m)], check=False)


def test_ctrl_c_unmounts_every_disk_without_clean(tmp_path):
    sc = tmp_path / "interrupted-disks.yaml"
    sc.write_text(SCENARIO.replace("NAME", "interrupted-disks"))
    harness = subprocess.Popen([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(sc), "--out",
                                str(tmp_path / "out"), "--quiet"], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    run_id = None
    try:
        run_id = await_fault(tmp_path)
        assert len(_disks(tmp_path)) == 2
        harness.send_signal(signal.SIGINT)
        _, err = harness.communicate(timeout=90)
        assert harness.returncode == 130, err[-2000:]
        assert not _disks(tmp_path) and tagged_processes(run_id) == []
    finally:
        reap_run(harness, run_id)
        for m in _disks(tmp_path):
            subprocess.run(["umount", "-l", str(m)], check=False)
