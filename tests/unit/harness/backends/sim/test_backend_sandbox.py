"""A simulated run touches no process, port or file outside its output folder (issue 8)."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import grpc
import pytest

import pschaos.harness.backends.sim.backend  # noqa: F401 - torch and the twin imported before the sandbox (torch runs ldconfig once)
import pschaos.psnodes.worker  # noqa: F401
from pschaos.harness.run.runner import Runner
from pschaos.harness.run.scenario import load_scenario
from tests.unit.helpers import only

SCENARIO = """\
name: sandbox
cluster: {shards: 1, copies: 3, workers: 1, replication: sync, training: async, model: mlp}
workload: {steps: 40}
faults:
  - at: {step: 10}
    kind: kill
    target: primary(shard=0)
    duration_s: 0.2
expect: {checks: [no-lost-acks, single-primary, exactly-once, replicas-match]}
"""
# a shard group added while training, its keys migrated by the coordinator (psnodes/elastic/migration.py)
MIGRATION = """\
name: sandbox-migration
cluster: {shards: 1, copies: 2, workers: 1, replication: sync, training: async, model: mlp}
workload: {steps: 60}
faults:
  - at: {step: 15}
    kind: scale-out-shards
    params: {to: 2, hold_s: 0.2}
expect:
  checks: [no-lost-acks, single-owner, single-primary, exactly-once, replicas-match]
  metrics: ["migrations == 1"]
"""


@pytest.mark.parametrize("scenario", [SCENARIO, MIGRATION], ids=["kill", "migration"])
def test_a_simulated_run_spawns_nothing_binds_nothing_and_writes_only_its_folder(tmp_path, monkeypatch, scenario):
    def refuse(*a, **k):
        raise AssertionError(f"a simulated run must not do this: {a[:2]}")
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(socket.socket, "bind", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    for make in ("insecure_channel", "secure_channel", "server"):     # gRPC's sockets are its C core's own
        monkeypatch.setattr(grpc, make, refuse)
    written: list[Path] = []
    real_open = open

    def tracking_open(file, mode="r", *a, **k):
        if any(c in mode for c in "wax+") and not str(file).startswith("/dev/"):
            written.append(Path(file).resolve())
        return real_open(file, mode, *a, **k)
    monkeypatch.setattr("builtins.open", tracking_open)
    sc_path = tmp_path / "sandbox.yaml"
    sc_path.write_text(scenario)
    sc = only(load_scenario(sc_path))
    out = tmp_path / "out"
    rep = Runner(sc, 3, out, "sim", quiet=True).run()
    assert rep["verdict"] == "pass", rep["unknown_reasons"]
    outside = [p for p in written if out.resolve() not in p.parents]
    assert written and not outside, outside
