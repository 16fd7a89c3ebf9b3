"""The worker's read-only evaluation pass (`eval_every`): it pulls and never pushes, its cold-start
ids read as the initializer's rows without creating them, it leaves the training batches as they
were, and the scenario setting is refused with the field and the fix when it cannot work."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from pschaos.harness.errors import ScenarioError
from pschaos.harness.run.metrics import eval_loss
from pschaos.harness.run.scenario import load_scenario
from pschaos.psnodes.store.embedding import EmbeddingTable, init_rows
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.models import WideDeepTask
from pschaos.psnodes.store.optimizers import OptimizerConfig
from pschaos.psnodes.worker import Worker

from tests.unit import inproc

WIDEDEEP_TABLES = dict(WideDeepTask.tables)


def scenario(tmp_path: Path, cluster: str, workload: str = "{steps: 100}") -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(f"name: x\ncluster: {cluster}\nworkload: {workload}\n")
    return p


def test_eval_every_defaults_to_off_and_takes_a_step_count(tmp_path: Path) -> None:
    assert load_scenario(scenario(tmp_path, "{model: widedeep}")).cluster.eval_every == 0
    assert load_scenario(scenario(tmp_path, "{model: widedeep, eval_every: 25}")).cluster.eval_every == 25


@pytest.mark.parametrize("cluster, workload, says", [
    ("{eval_every: -5}", "{steps: 100}", ["s.yaml:2: cluster.eval_every", "eval_every=-5", "0 for none"]),
    ("{eval_every: often}", "{steps: 100}", ["s.yaml:2: cluster.eval_every", "integer"]),
    ("{eval_every: 101}", "{steps: 100}", ["cluster.eval_every: 101 is more than workload.steps=100",
                                           "use at most 100, or 0 for none"]),
])
def test_a_bad_eval_every_names_the_field_and_the_fix(tmp_path: Path, cluster: str, workload: str,
                                                      says: list[str]) -> None:
    msg = str(pytest.raises(ScenarioError, load_scenario, scenario(tmp_path, cluster, workload)).value)
    assert all(s in msg for s in says), msg


def test_a_duration_workload_may_evaluate_less_often_than_its_nominal_steps(tmp_path: Path) -> None:
    sc = load_scenario(scenario(tmp_path, "{eval_every: 500}", "{steps: 100, duration_s: 30}"))
    assert sc.cluster.eval_every == 500


def test_the_worker_refuses_a_negative_cadence(tmp_path: Path) -> None:
    ip = inproc.start(tmp_path, tables=WIDEDEEP_TABLES)
    try:
        with pytest.raises(ValueError, match="eval_every=-1: .*0 for none"):
            Worker(ip.cfg, "worker-0", "widedeep", device="cpu", client=ip.client(), eval_every=-1)
    finally:
        ip.close()


def test_held_out_batches_hold_cold_ids_and_training_batches_never_do() -> None:
    task = WideDeepTask(3, torch.device("cpu"))
    rng = np.random.default_rng(1)
    trained = np.concatenate([task.batch(rng).ids.ravel() for _ in range(200)])
    assert not task.is_cold(trained).any()
    held = task.eval_batch(np.random.default_rng(2)).ids
    share = task.is_cold(held).mean()
    assert 0.1 < share < 0.4                                   # cold_fraction = 0.25
    # the same seeded stream gives the same held-out batch: runs stay reproducible
    assert (task.eval_batch(np.random.default_rng(2)).ids == held).all()


def test_a_never_pushed_id_reads_the_initializer_row_and_is_not_created() -> None:
    t = EmbeddingTable("emb", 4, OptimizerConfig(name="adam", lr=0.01), seed=5)
    t.push(np.array([1, 2]), np.ones((2, 4), np.float32), seq=1)
    before = t.n
    got = t.lookup(np.array([2, 900_000, 900_001]))
    assert t.n == before == 2 and 900_000 not in t.index
    assert np.array_equal(got[1:], init_rows(5, "emb", np.array([900_000, 900_001]), 4))


def stored_ids(ip: inproc.InProc) -> np.ndarray:
    return np.concatenate([t.ids[: t.n] for node in ip.nodes.values() for t in node.store.tables.values()])


def test_an_eval_pass_pulls_rows_and_pushes_nothing(tmp_path: Path) -> None:
    ip = inproc.start(tmp_path, shards=2, tables=WIDEDEEP_TABLES)
    events = tmp_path / "worker-0.jsonl"
    try:
        client = ip.client(events=events)
        w = Worker(ip.cfg, "worker-0", "widedeep", device="cpu", client=client,
                   events=EventLog(events, "worker-0"), eval_every=2)
        w.start()
        w.step(0)
        seqs = {s: n.store.seq for s, n in ip.nodes.items()}
        ids_before, pushed, pulled = stored_ids(ip), client.pushed_bytes, client.pulled_bytes
        rng_state = w.rng.bit_generator.state
        loss = w.evaluate(0)
        assert {s: n.store.seq for s, n in ip.nodes.items()} == seqs          # nothing applied
        assert client.pushed_bytes == pushed and client.pulled_bytes > pulled
        assert np.array_equal(np.sort(stored_ids(ip)), np.sort(ids_before))   # no row created
        assert not w.task.is_cold(stored_ids(ip)).any()
        assert w.rng.bit_generator.state == rng_state                         # training batches untouched
        ev = [json.loads(line) for line in events.read_text().splitlines()]
        evals = [e for e in ev if e["f"] == "eval"]
        assert len(evals) == 1 and evals[0]["value"]["loss"] == pytest.approx(loss)
        assert evals[0]["value"]["cold_ids"] > 0 and evals[0]["value"]["ids"] >= evals[0]["value"]["cold_ids"]
        assert not [e for e in ev if e["f"] == "push" and e["t"] >= evals[0]["t"]]
    finally:
        ip.close()


def test_a_run_evaluates_after_every_nth_step_and_only_training_writes(tmp_path: Path) -> None:
    ip = inproc.start(tmp_path, shards=2, tables=WIDEDEEP_TABLES)
    events = tmp_path / "worker-0.jsonl"
    try:
        w = Worker(ip.cfg, "worker-0", "widedeep", device="cpu", client=ip.client(events=events),
                   events=EventLog(events, "worker-0"), eval_every=2)
        w.run(5)
        ev = [json.loads(line) for line in events.read_text().splitlines()]
        assert [e["value"]["step"] for e in ev if e["f"] == "eval"] == [1, 3]
        oks = [e for e in ev if e["f"] == "push" and e["type"] == "ok"]
        assert sum(n.store.pushes for n in ip.nodes.values()) == len(oks) == 5 * 2
        assert not w.task.is_cold(stored_ids(ip)).any()
        assert eval_loss(ev) == pytest.approx(w.eval_losses[-1], abs=1e-6)
    finally:
        ip.close()


def test_eval_loss_is_each_workers_last_pass_averaged_and_none_without_passes() -> None:
    ev = [{"f": "eval", "value": {"worker": "worker-0", "loss": 0.9}},
          {"f": "eval", "value": {"worker": "worker-0", "loss": 0.5}},
          {"f": "eval", "value": {"worker": "worker-1", "loss": None, "error": "unavailable"}},
          {"f": "eval", "value": {"worker": "worker-1", "loss": 0.7}}]
    assert eval_loss(ev) == pytest.approx(0.6)
    assert eval_loss([{"f": "train-done", "value": {}}]) is None              # an older history
