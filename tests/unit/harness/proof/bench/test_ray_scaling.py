"""`pschaos bench sim --ray-seeds`: the scaling efficiency and the 1,000-seed projection are what the
two rounds' figures say, and a round whose verdicts differ is said (fake rounds: no Ray here)."""
from __future__ import annotations

from pschaos.harness.proof.bench import ray_scaling


def _fake(rates: dict[int, float], verdicts: dict[int, dict]):
    def one(workers, seeds, out, progress):
        return {"workers": workers, "seeds": seeds, "wall_s": 3600 * seeds / rates[workers],
                "seeds_per_hour": rates[workers], "run_wall_s_median": 13.0, "run_cpu_s_median": 10.0,
                "verdicts": verdicts[workers], "nodes": workers}
    return one


def test_efficiency_and_projection_follow_the_rounds(monkeypatch):
    same = {1: "pass", 2: "pass"}
    monkeypatch.setattr(ray_scaling, "_round", _fake({1: 250.0, 2: 450.0}, {1: same, 2: same}))
    doc = ray_scaling.ray_scaling(2, cores=2)
    assert doc["scaling_efficiency"] == 0.9 and doc["same_verdicts"] is True
    assert doc["projected_1000_seeds_min"] == round(1000 / (250.0 * 2 * 0.9) * 60, 1)
    assert "scaling efficiency 1 -> 2 workers: 0.9" in ray_scaling.describe(doc)
    monkeypatch.setattr(ray_scaling, "_round", _fake({1: 250.0, 2: 450.0}, {1: same, 2: {1: "pass", 2: "fail"}}))
    assert ray_scaling.ray_scaling(2, cores=2)["same_verdicts"] is False
