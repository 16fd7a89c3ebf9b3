"""`pschaos cluster scale` end to end: real etcd, real node and worker processes (issue 13; review
section 4: a scale that fails must leave no group running and the old routing valid; section 5:
cluster scale and the abort path had no test).

One cluster (`cluster up --shards 2 --max-shards 3`, a worker training throughout):
0. `cluster scale --shards 3` interrupted (SIGINT, as Ctrl-C) once shard 2's group runs: the group
   is stopped again, not orphaned (it used to stay running, its pids in the state file);
1. `cluster scale --shards 3 --fenced-hold-s 5`, interrupted (SIGINT, as Ctrl-C) while both sources
   are fenced: the coordinator aborts, the old routing stands (epoch 0 over shards 0 and 1, no
   migration), the sources are unfenced, and the group it started for shard 2 is stopped, its pids
   out of the state file and its record out of etcd;
2. `cluster scale --shards 3` again: it switches while the worker trains; `cluster status` shows
   routing epoch 1 over three shards, shard 2 served by a primary, and the worker acks pushes at
   routing epoch 1.
`cluster down` runs in a `finally`, and no process of the run is left.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pschaos.harness.machinery.procs import tagged_processes, wait_until
from pschaos.harness.machinery.tools import REPO, find
from pschaos.psnodes.elastic import routing
from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.etcd import Etcd

CLI = [sys.executable, "-m", "pschaos.harness.commands.cli"]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=timeout, cwd=REPO)


def node_processes(run_id: str, shard: int) -> list[str]:
    """The node names of `shard` that run as processes of `run_id` (by their command line)."""
    out = []
    for p in tagged_processes(run_id):
        try:
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if "--name" in cmd and cmd[cmd.index("--name") + 1].startswith(f"shard-{shard}/"):
            out.append(cmd[cmd.index("--name") + 1])
    return out


def fences(client: PSClient, cfg: ClusterConfig, shards) -> dict[str, str]:
    return {n: client.status(n).fence for s in shards for n in cfg.shard_nodes(s)}


def worker_acks_at(d: Path, routing_epoch: int) -> int:
    n = 0
    for f in (d / "events").glob("worker-*.jsonl"):
        for line in f.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("f") == "push" and e.get("type") == "ok" and e["value"].get("routing_epoch") == routing_epoch:
                n += 1
    return n


def interrupted_scale(d: Path, extra: list[str], moment) -> tuple[int, str]:
    """`cluster scale --shards 3` SIGINTed (as Ctrl-C) once `moment()` holds: its exit code and output."""
    p = subprocess.Popen(CLI + ["cluster", "scale", "--shards", "3", *extra, "--dir", str(d)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        assert wait_until(moment, 40, 0.02), "the moment to interrupt the scale never came"
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, out


def test_cluster_scale_out_while_training_after_an_interrupted_scale_left_nothing(tmp_path):
    if find("etcd") is None:
        pytest.skip("etcd is not installed (apt-get install etcd-server, or make install)")
    d = tmp_path / "cl"
    t0 = time.monotonic()
    run_id = None
    try:
        up = cli("cluster", "up", "--shards", "2", "--max-shards", "3", "--copies", "2", "--workers", "1",
                 "--steps", "100000", "--dir", str(d))
        assert up.returncode == 0, up.stdout + up.stderr
        state = json.loads((d / "state.json").read_text())
        run_id = state["run_id"]
        cfg = ClusterConfig.load(d / "cluster.json")
        etcd = Etcd(cfg.etcd, timeout=1.0)
        client = PSClient(ClusterConfig.load(d / "client.json"), "test", retry_budget=2.0)
        t_up = time.monotonic() - t0

        # 0. interrupted (Ctrl-C) once the new group runs, before any switch: it used to stay running
        rc, out = interrupted_scale(d, [], lambda: len(node_processes(run_id, 2)) == cfg.copies)
        assert rc == 130, out
        assert routing.read(etcd, cfg)[0] == Routing(0, (0, 1), None), "the interrupt came after the switch"
        assert node_processes(run_id, 2) == [], "the interrupted scale left shard 2's group running"
        assert not [n for n in json.loads((d / "state.json").read_text())["pids"] if n.startswith("shard-2/")]

        # 1. interrupted while the sources are fenced
        def fenced() -> bool:
            m = routing.read(etcd, cfg)[0].migration
            return m is not None and m.phase == "fenced" and set(fences(client, cfg, (0, 1)).values()) == {m.id}
        rc, out = interrupted_scale(d, ["--fenced-hold-s", "5"], fenced)
        assert rc == 130, out
        assert '"event": "migration-abort"' in out, out
        assert routing.read(etcd, cfg)[0] == Routing(0, (0, 1), None)
        assert set(fences(client, cfg, (0, 1)).values()) == {""}, "a source stayed fenced"
        assert node_processes(run_id, 2) == [], "the interrupted scale left shard 2's group running"
        pids = json.loads((d / "state.json").read_text())["pids"]
        assert not [n for n in pids if n.startswith("shard-2/")]
        assert etcd.get(cfg.shard_key(2)) is None
        assert psutil.pid_exists(pids["worker-0"]), "the worker stopped training"

        # 2. scale out while the worker trains
        sc = cli("cluster", "scale", "--shards", "3", "--dir", str(d))
        assert sc.returncode == 0, sc.stdout + sc.stderr
        assert "shards [0, 1] -> [0, 1, 2] at routing epoch 1" in sc.stdout
        st = cli("cluster", "status", "--dir", str(d), timeout=60)
        assert st.returncode == 0, st.stderr
        assert "routing epoch 1: shards [0, 1, 2]" in st.stdout, st.stdout
        shard2 = [line.split() for line in st.stdout.splitlines() if line.strip().startswith("shard-2/")]
        assert len(shard2) == cfg.copies and ["primary" in x for x in shard2].count(True) == 1, st.stdout
        assert all("routing" in x and x[x.index("routing") + 2] == "1" for x in shard2), st.stdout
        assert "training" in st.stdout
        assert wait_until(lambda: worker_acks_at(d, 1) > 0, 20, 0.2), "the worker acked nothing at routing epoch 1"
        client.close()
        print(f"\ncluster up {t_up:.1f} s, all {time.monotonic() - t0:.1f} s")
    finally:
        if d.exists():
            down = cli("cluster", "down", "--dir", str(d), timeout=60)
            assert down.returncode == 0, down.stderr
        if run_id:
            assert not tagged_processes(run_id)
