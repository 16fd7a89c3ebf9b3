"""`pschaos clean` and the run registry: a detached cluster (owner -1) whose processes are all
gone leaves an entry that no owner's death would ever clear; clean drops it, and keeps the entry of
one still running."""
from __future__ import annotations

import json
import os
import subprocess
import time

import psutil

from pschaos.harness.commands import clean as clean_cmd
from pschaos.harness.machinery import registry
from pschaos.harness.machinery.procs import OWNER_ENV, RUN_ENV


def _age(run_id: str, seconds: float) -> None:
    """Make a registry entry look `seconds` old (past the grace a starting cluster gets)."""
    f = registry.DIR / f"{run_id}.json"
    doc = json.loads(f.read_text())
    f.write_text(json.dumps({**doc, "registered": time.time() - seconds}))


def _environ(p: psutil.Process) -> dict:
    try:
        return p.environ()
    except psutil.Error:          # another worker's process, gone meanwhile
        return {}


def _only_here(monkeypatch) -> None:
    """No disk, Ray folder or image rootfs of the machine is these tests' to reap: another test's
    dead disk is that test's to see unmounted by its own clean (CI of 14be8b9)."""
    monkeypatch.setattr(clean_cmd, "reap_disks", lambda all_mounts=False: [])
    monkeypatch.setattr(clean_cmd, "remove_dead", lambda: [])
    monkeypatch.setattr(clean_cmd, "stale_rootfs", lambda: [])


def test_clean_drops_a_dead_detached_cluster_and_keeps_a_live_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(registry, "DIR", tmp_path / "runs")
    monkeypatch.setattr(clean_cmd, "reap_engine", lambda all_runs: ([], [], None))   # no engine here
    monkeypatch.setattr(clean_cmd, "engine_runs", lambda: {"cluster-box01"})       # one lives in containers
    # the registry here is the test's own: every real run's table would look dead, so none is listed
    monkeypatch.setattr(clean_cmd.nft, "tables", lambda: [])
    _only_here(monkeypatch)
    # and only this test's processes are clean's to see: another test's orphans are that test's to reap
    ours = ("cluster-dead01", "cluster-live01")
    real = clean_cmd.tagged_processes
    monkeypatch.setattr(clean_cmd, "tagged_processes", lambda run_id=None: [
        p for p in real(run_id) if _environ(p).get(RUN_ENV) in ours])
    registry.register("cluster-dead01", -1, "pschaos_cluster_dead01")
    registry.register("cluster-live01", -1, "pschaos_cluster_live01")
    registry.register("cluster-box01", -1, "pschaos_cluster_box01")
    registry.register("cluster-young01", -1, "pschaos_cluster_young01")     # still starting: no process yet
    for rid in ("cluster-dead01", "cluster-live01", "cluster-box01"):
        _age(rid, 1000)
    live = subprocess.Popen(["sleep", "60"], env=dict(os.environ, **{RUN_ENV: "cluster-live01", OWNER_ENV: "-1"}))
    try:
        time.sleep(0.2)
        assert clean_cmd.clean() == 0
        assert {r["run_id"] for r in registry.runs()} == {"cluster-live01", "cluster-box01", "cluster-young01"}
        assert live.poll() is None                      # a detached cluster is only `cluster down`'s to stop
    finally:
        live.kill()
        live.wait()
    assert "reaped" not in capsys.readouterr().out.split("pschaos clean:")[0]


def test_clean_keeps_every_detached_cluster_when_the_engine_does_not_answer(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "DIR", tmp_path / "runs")
    monkeypatch.setattr(clean_cmd, "reap_engine", lambda all_runs: ([], [], "no engine"))
    monkeypatch.setattr(clean_cmd, "engine_runs", lambda: None)          # configured, not answering
    monkeypatch.setattr(clean_cmd.nft, "tables", lambda: [])
    _only_here(monkeypatch)
    monkeypatch.setattr(clean_cmd, "tagged_processes", lambda run_id=None: [])
    registry.register("cluster-unknown01", -1, "pschaos_cluster_unknown01")
    _age("cluster-unknown01", 1000)
    assert clean_cmd.clean() == 0
    assert {r["run_id"] for r in registry.runs()} == {"cluster-unknown01"}   # its containers may well run
