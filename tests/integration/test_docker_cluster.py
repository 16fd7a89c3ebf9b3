"""`pschaos cluster up --backend docker`: a standing cluster of containers that `cluster down`
removes whole (containers and volumes, by the run's label)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pschaos.harness.backends.docker import engine
from pschaos.harness.machinery.tools import REPO

CLI = [sys.executable, "-m", "pschaos.harness.commands.cli"]


def test_cluster_up_status_down_as_containers(tmp_path):
    why = engine.available()
    if why:
        pytest.skip(f"needs a Docker engine: {why}")
    from pschaos.harness.backends.docker.containers import remove_run, run_containers

    d = tmp_path / "cl"
    up = subprocess.run(CLI + ["cluster", "up", "--backend", "docker", "--shards", "1", "--copies", "2",
                               "--workers", "1", "--steps", "30", "--dir", str(d)],
                        capture_output=True, text=True, timeout=180, cwd=REPO)
    assert up.returncode == 0, up.stderr
    run_id = json.loads((d / "state.json").read_text())["run_id"]
    client = engine.client()
    try:
        names = {c.labels["pschaos.node"] for c in run_containers(client, run_id)}
        assert {"etcd", "shard-0/0", "shard-0/1", "worker-0"} <= names
        assert all(c.attrs["HostConfig"]["NetworkMode"] == "host" for c in run_containers(client, run_id))
        st = subprocess.run(CLI + ["cluster", "status", "--dir", str(d)], capture_output=True, text=True,
                            timeout=60, cwd=REPO)
        assert "shard-0/1" in st.stdout
        down = subprocess.run(CLI + ["cluster", "down", "--dir", str(d)], capture_output=True, text=True,
                              timeout=120, cwd=REPO)
        assert down.returncode == 0, down.stderr
        assert run_containers(client, run_id) == [] and not d.exists()
    finally:
        remove_run(client, run_id)
        client.close()
