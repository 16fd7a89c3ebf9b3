"""SIGKILL a harness running on --backend docker mid-fault: `pschaos clean` then leaves 0
containers, 0 volumes and 0 run images of that run (found by label), and no nftables table."""
from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from pschaos.harness.backends.docker import engine
from pschaos.harness.machinery.procs import wait_until
from pschaos.harness.machinery.tools import REPO, find
from pschaos.netfaults.nft import delete_table, tables

pytestmark = pytest.mark.xdist_group("pschaos-clean")       # `pschaos clean` is machine-wide: one at a time (tests/unit/test_xdist_groups.py)

SCENARIO = """name: killed-docker-harness
cluster: {shards: 1, copies: 2, workers: 1, model: mlp, checkpoint_interval_s: 0.5}
workload: {steps: 5000}
faults:
  - at: {time: 0.5}
    kind: loss
    target: workers -> nodes
    params: {percent: 5}
    duration_s: 120
  - at: {time: 1.0}
    kind: disk-full
    target: replica(shard=0)
    duration_s: 120
"""


def left(run_id: str) -> dict[str, list[str]]:
    from pschaos.harness.backends.docker.containers import run_containers, run_images, run_volumes

    c = engine.client()
    try:
        return {"containers": [x.name for x in run_containers(c, run_id)],
                "volumes": [x.name for x in run_volumes(c, run_id)],
                "images": [x.id for x in run_images(c, run_id)]}
    finally:
        c.close()


@pytest.fixture
def docker_run(tmp_path):
    """Start a docker run of SCENARIO as a separate harness and wait until both faults are on;
    yields (harness, run id). Whatever a failed assertion left is removed afterwards."""
    why = engine.available()
    if why:
        pytest.skip(f"needs a Docker engine: {why}")
    if find("toxiproxy-server") is None or find("nft") is None:
        pytest.skip("toxiproxy-server (make install) and nft (apt-get install nftables) are needed")
    sc = tmp_path / "killed-docker-harness.yaml"
    sc.write_text(SCENARIO)
    out = tmp_path / "out"
    harness = subprocess.Popen([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(sc), "--backend", "docker",
                                "--out", str(out), "--quiet"], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    hist = out / "run" / "events" / "harness.jsonl"
    run_id = None
    try:
        assert wait_until(lambda: hist.exists() and hist.read_text().count("fault-start") >= 2, 90, 0.1), \
            "the run never reached its faults"
        run_id = json.loads(hist.read_text().splitlines()[0])["value"]["run_id"]
        yield harness, run_id
    finally:
        if harness.poll() is None:
            harness.kill()
        if run_id is not None:
            from pschaos.harness.backends.docker.containers import remove_run

            c = engine.client()
            remove_run(c, run_id)
            c.close()
            for t in tables():
                if run_id.replace("-", "_") in t:
                    delete_table(t)


def test_sigkilled_docker_run_is_cleaned_up(docker_run):
    harness, run_id = docker_run
    before = left(run_id)
    assert len(before["containers"]) >= 5, before      # etcd, toxiproxy, two copies, a worker (+ holder)
    assert before["volumes"], before                   # the copies' data volumes
    harness.send_signal(signal.SIGKILL)
    harness.wait(10)
    r = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "clean"], cwd=REPO, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert left(run_id) == {"containers": [], "volumes": [], "images": []}
    assert not [t for t in tables() if run_id.replace("-", "_") in t]


def test_ctrl_c_removes_the_runs_containers_and_volumes_without_clean(docker_run):
    harness, run_id = docker_run
    harness.send_signal(signal.SIGINT)
    harness.wait(60)
    assert left(run_id) == {"containers": [], "volumes": [], "images": []}
    assert not [t for t in tables() if run_id.replace("-", "_") in t]
