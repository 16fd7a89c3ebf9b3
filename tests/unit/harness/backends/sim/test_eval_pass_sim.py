"""The twin runs the worker's read-only evaluation pass as it is (psnodes/worker.py): a short
wide-and-deep run with `eval_every` logs its passes, charges each the calibrated eval time in
virtual time, and ends with copies that match (the passes created no row)."""
from __future__ import annotations

from pathlib import Path

import yaml

from pschaos.harness.history.events import read_events
from pschaos.harness.run.runner import Runner
from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.backends.sim.calibration import Calibration
from tests.unit.helpers import only

SCENARIO = {"name": "eval-short",
            "cluster": {"shards": 2, "copies": 2, "workers": 1, "model": "widedeep", "eval_every": 10},
            "workload": {"steps": 40},
            "expect": {"checks": ["no-lost-acks", "replicas-match"]}}


def test_a_simulated_worker_evaluates_read_only_at_its_calibrated_cost(tmp_path: Path) -> None:
    path = tmp_path / "eval-short.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    rep = Runner(only(load_scenario(path)), 3, tmp_path / "run", backend="sim", quiet=True).run()
    assert rep["verdict"] == "pass", (rep["checks"], rep.get("unknown_reasons"))
    evals = [e["value"] for e in read_events(tmp_path / "run" / "history.jsonl") if e["f"] == "eval"]
    assert [v["step"] for v in evals] == [9, 19, 29, 39]
    assert all(v["cold_ids"] > 0 and v["took_s"] >= Calibration.default().eval_s("widedeep") for v in evals)
    assert rep["metrics"]["eval_passes"] == 4 and rep["metrics"]["eval_loss"] == round(evals[-1]["loss"], 6)
