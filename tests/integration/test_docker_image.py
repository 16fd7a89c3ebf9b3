"""The docker backend's images, on a real engine: the self-contained image runs a scenario with
nothing of this machine mounted but the run folder, and a scenario that names an image of the
user's own (here: that image under a name of its own) runs that very image, recorded by id."""
from __future__ import annotations

import json

import pytest

from pschaos.harness.backends.docker import engine
from pschaos.harness.run.runner import Runner
from pschaos.harness.run.scenario import Scenario
from tests.unit.helpers import only

TINY = {"name": "docker-image-tiny",
        "cluster": {"shards": 1, "copies": 2, "workers": 1, "model": "mlp", "replication": "sync"},
        "workload": {"steps": 40},
        "faults": [{"at": {"step": 10}, "kind": "kill", "target": "replica(shard=0)", "until": {"step": 25}}],
        "expect": {"checks": ["no-lost-acks", "single-primary", "exactly-once", "replicas-match"],
                   "metrics": ["lost_acked_updates == 0"]}}


def test_a_scenario_runs_the_users_image_by_name_and_records_it(tmp_path):
    why = engine.available()
    if why:
        pytest.skip(f"needs a Docker engine: {why}")
    from pschaos.harness.backends.docker.build import ensure_self_contained

    client = engine.client(timeout=600)
    try:
        built = client.images.get(ensure_self_contained(client, say=lambda line: None))
        built.tag("pschaos-test-user", "1")
        sc = only(Scenario.model_validate({**TINY, "cluster": {**TINY["cluster"], "image": "pschaos-test-user:1"}}))
        rep = Runner(sc, 1, tmp_path / "out", "docker", quiet=True).run()
        assert rep["verdict"] == "pass", rep.get("unknown_reasons") or rep["checks"]
        start = next(json.loads(line) for line in (tmp_path / "out" / "history.jsonl").read_text().splitlines()
                     if '"run-start"' in line)
        assert start["value"]["image"] == {"tag": built.id, "id": built.id, "chosen": "pschaos-test-user:1"}
        logs = (tmp_path / "out" / "run" / "logs")
        assert "final loss" in (logs / "worker-0.log").read_text()
    finally:
        try:
            client.images.remove("pschaos-test-user:1")
        except Exception:  # noqa: BLE001 - the tag only; the image stays (it is the cache)
            pass
        client.close()
