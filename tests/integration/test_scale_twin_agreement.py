"""The scale level agrees with the per-RPC twin where both run (issue 11: within 5% on throughput
and on failover counts).

The same small cluster (4 workers, 4 shards x 3 copies, sync replication, mlp) trains for 12
virtual seconds while the primaries of shards 0 and 1 are killed at 3 s and 7 s and restarted a
second later: once through psnodes' own code message by message (`--backend sim`), once at the
scale level with the same kills as an explicit schedule. Both read the committed calibration.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from harness.runner import Runner
from harness.scenario import load_scenario
from harness.sim.calibration import DEFAULT_PATH, Calibration
from harness.sim.scale.build import build
from harness.sim.scale.engine import ScaleRun
from harness.sim.validate import observe

SHARDS, SECONDS = 4, 12.0
KILLS = [(3.0, 0), (7.0, 1)]


def test_scale_level_matches_the_per_rpc_twin(tmp_path: Path):
    doc = {"name": "scale-agreement", "description": "the scale level against the per-RPC twin",
           "cluster": {"shards": SHARDS, "copies": 3, "workers": 4, "replication": "sync", "training": "async",
                       "model": "mlp"},
           "workload": {"steps": 100000, "duration_s": SECONDS},
           "faults": [{"at": {"time": t}, "kind": "kill", "target": f"primary(shard={s})", "duration_s": 1}
                      for t, s in KILLS],
           "expect": {"checks": ["no-lost-acks"]}}
    path = tmp_path / "scale-agreement.yaml"
    path.write_text(yaml.safe_dump(doc))
    rep = Runner(load_scenario(path), 1, tmp_path / "twin", "sim", quiet=True).run()
    assert rep["verdict"] == "pass", rep.get("reasons")
    twin = observe(tmp_path / "twin")

    spec = build(dict(workers=4, shards=SHARDS, copies=3, hours=SECONDS / 3600, seed=1, failures="none",
                      schedule=[{"at_s": t, "kind": "kill", "target": f"primary(shard={s})", "restart_after_s": 1}
                                for t, s in KILLS]))
    scale = ScaleRun(spec, Calibration.load(DEFAULT_PATH)).run()
    acked_per_s = scale["steps_per_simulated_s"] * SHARDS       # one acked push per shard per step

    assert abs(acked_per_s - twin["acked_per_s"]) / twin["acked_per_s"] <= 0.05, (acked_per_s, twin["acked_per_s"])
    assert scale["failovers"] == len(twin["failover_ms"]) == len(KILLS)
    p50 = sorted(twin["failover_ms"])[0]
    assert abs(scale["failover_ms"]["p50"] - p50) / p50 <= 0.10, (scale["failover_ms"], twin["failover_ms"])
