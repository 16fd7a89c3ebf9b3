"""Seed replay (issue 10): one seed gives one fault schedule, on every backend and every time.

A nemesis scenario runs with the same seed on the real processes and on the simulator: the
schedule drawn before the run (kinds, selectors, times, durations, params) is the same each time,
the faults fire in that order at the drawn times (within the wall clock's slack on real
processes: a second process run would fire at those same times, so it is not made), and the
report prints the exact command that replays it. On the simulator the
whole history is the same, byte for byte (tests/unit/harness/backends/sim/test_determinism.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pschaos.harness.machinery.tools import REPO, find
from tests.unit.helpers import only_text

pytestmark = pytest.mark.integration

SCENARIO = """\
name: replay-nemesis
cluster: {shards: 1, copies: 3, workers: 2, replication: sync, training: async, model: mlp}
workload: {steps: 100000, duration_s: 9}
nemesis:
  kinds: [kill, pause, latency]
  interval_s: 1.2
  duration_s: 0.8
  start_s: 1.5
  stop_s: 6.5
  targets: {kill: replica(shard=any), pause: primary(shard=any), latency: workers -> shard(any)}
  params: {latency: {latency_ms: 40, jitter_ms: 10}}
expect:
  checks: [no-lost-acks, single-primary, exactly-once]
"""


def _run(path, out, backend, seed=5):      # seed 5 draws a pause, a kill and a latency (seed 7: one latency)
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(path), "--backend", backend, "--seed", str(seed),
                        "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=300, cwd=REPO)
    events = [json.loads(x) for x in (out / "history.jsonl").read_text().splitlines()]
    start = next(e for e in events if e["f"] == "run-start")
    t0 = start["t"]
    fired = [(e["value"]["index"], e["value"]["kind"], e["value"]["selector"], round(e["t"] - t0, 2))
             for e in events if e["f"] == "fault-start"]
    report = json.loads((out / "report.json").read_text())
    return p, start["value"]["schedule"], fired, report


def test_one_seed_one_schedule_on_processes_and_on_the_simulator(tmp_path):
    if find("etcd") is None:
        pytest.skip("etcd is not installed (apt-get install etcd-server, or make install)")
    path = tmp_path / "replay-nemesis.yaml"
    path.write_text(only_text(SCENARIO))
    a = _run(path, tmp_path / "a", "process")
    s = _run(path, tmp_path / "s", "sim")
    other = _run(path, tmp_path / "o", "sim", seed=8)
    assert a[1] and a[1] == s[1]                                # the drawn schedule itself, in two runs
    assert sorted(f["kind"] for f in a[1]) == ["kill", "latency", "pause"]      # seed 5's draw: every kind
    assert other[1] != a[1]                                     # and it does depend on the seed
    for p, sched, fired, rep in (a, s):
        assert p.returncode == 0, p.stdout + p.stderr[-2000:]
        assert [i for i, *_ in fired] == list(range(len(sched)))            # every fault fired, in order
        assert [(k, sel) for _, k, sel, _ in fired] == [(f["kind"], f["target"]) for f in sched]
        assert rep["rerun"].endswith("--seed 5") and f"--backend {rep['backend']}" in rep["rerun"]
    late = [abs(t - f["at"]["time"]) for (*_, t), f in zip(a[2], a[1])]
    assert max(late) < 0.5, (a[2], a[1])                        # at the drawn times, up to the wall clock's slack
    assert [t for *_, t in s[2]] == [round(f["at"]["time"], 2) for f in s[1]] or \
        max(abs(t - f["at"]["time"]) for (*_, t), f in zip(s[2], s[1])) < 0.06
