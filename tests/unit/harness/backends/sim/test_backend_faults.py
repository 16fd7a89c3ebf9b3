"""SimBackend's process faults and its refusals: etcd killed and started again, a paused copy's
Status, a paused worker, and a fault kind the twin does not model (refused by name: the run is
`unknown` and says which kind, never a silent pass)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import pschaos.harness.run.runner
import pschaos.harness.run.scenario
from pschaos.harness.errors import HarnessError
from pschaos.harness.run.runner import Runner
from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.backends.sim.backend import SimBackend
from pschaos.netfaults.faults import LINK_FAULTS
from pschaos.psnodes.config import ShardRecord
from pschaos.netfaults.faults.base import ToxicFault


@pytest.fixture
def backend(tmp_path: Path):
    be = SimBackend(ClusterSpec(shards=1, copies=3, workers=1), tmp_path / "run", "t-1", seed=3)
    try:
        yield be
    finally:
        be.teardown()


def test_etcd_killed_refuses_routing_falls_back_to_the_copies_and_restart_takes_etcd_start_s(backend) -> None:
    be = backend
    be.start(timeout=10)
    before = be.routing()
    be.kill("etcd")
    assert not be.alive("etcd")
    rec = before[0]                       # as the live primary reports it (its Status has no start_seq)
    assert be.routing() == {0: ShardRecord(rec.epoch, rec.primary, rec.isr)}
    t0 = be.clock.monotonic()
    be.restart("etcd")
    assert be.alive("etcd") and be.clock.monotonic() - t0 == pytest.approx(be.cal.etcd_start_s)
    assert be.routing() == before


def test_etcd_paused_routing_waits_the_clients_second_then_asks_the_copies(backend) -> None:
    be = backend
    be.start(timeout=10)
    rec = be.routing()[0]
    be.pause("etcd")
    assert be.alive("etcd")                 # SIGSTOP: the process lives
    t0 = be.clock.monotonic()
    assert be.routing() == {0: ShardRecord(rec.epoch, rec.primary, rec.isr)}
    assert be.clock.monotonic() - t0 == pytest.approx(1.0)
    be.resume("etcd")
    assert be.routing()[0].epoch >= rec.epoch


def test_a_paused_copy_answers_no_status_until_the_callers_timeout_and_answers_once_resumed(backend) -> None:
    be = backend
    be.start(timeout=10)
    node = be.routing()[0].primary
    be.pause(node)
    t0 = be.clock.monotonic()
    assert be.status(node, timeout=0.3) is None
    assert be.clock.monotonic() - t0 == pytest.approx(0.3, abs=0.05)     # waited, as a real client does
    assert be.final_state(node) is None
    be.resume(node)
    assert be.status(node).node == node and be.final_state(node) is not None


def test_a_paused_worker_makes_no_step_until_resumed(tmp_path: Path) -> None:
    be = SimBackend(ClusterSpec(shards=1, copies=2, workers=1), tmp_path / "run", "t-2", seed=3)
    try:
        be.start(timeout=10, workers_steps=400)
        steps = lambda: (tmp_path / "run" / "events" / "worker-0.jsonl").read_text().count('"train-step"')  # noqa: E731
        be.clock.sleep(0.5)
        be.pause("worker-0")
        be.clock.sleep(0.05)                  # a step in progress finishes its current wait
        held = steps()
        be.clock.sleep(1.0)
        assert steps() == held and be.alive("worker-0")
        be.resume("worker-0")
        be.clock.sleep(0.5)
        assert steps() > held
    finally:
        be.teardown()


def test_the_link_fault_of_a_kind_the_sim_does_not_model_is_refused_by_name(backend) -> None:
    be = backend
    be.start(timeout=10)
    with pytest.raises(HarnessError, match="'duplicate' is not modelled by the simulator"):
        be.link_fault("duplicate", [("worker-0", "shard-0/0")], {})


def register_duplicate(monkeypatch) -> type[ToxicFault]:
    """A network fault kind netfaults might gain one day and the twin does not model. A LinkFault
    subclass registers itself in LINK_FAULTS when defined, so the entry is taken by monkeypatch
    first: it is gone again after the test."""
    monkeypatch.setitem(LINK_FAULTS, "duplicate", None)

    class Duplicate(ToxicFault):
        kind = "duplicate"
        toxic_type = "duplicate"
        params_spec = {"percent": (float, 10.0)}

        def attributes(self) -> dict:
            return {"percent": self.params["percent"]}
    return Duplicate


def test_a_scenario_with_an_unmodelled_kind_runs_unknown_and_names_it(tmp_path: Path, monkeypatch) -> None:
    """As if netfaults had a `duplicate` kind: the scenario is valid, the process backend could
    run it, and the simulator refuses it at its time: the fault-error names the kind, the run is
    unknown (exit code 3), never pass."""
    register_duplicate(monkeypatch)
    for mod in (pschaos.harness.run.scenario, pschaos.harness.run.runner):
        monkeypatch.setattr(mod, "LINK_KINDS", (*mod.LINK_KINDS, "duplicate"))
    monkeypatch.setattr(pschaos.harness.run.scenario, "ALL_KINDS", (*pschaos.harness.run.scenario.ALL_KINDS, "duplicate"))
    spec = {"name": "sim-unmodelled", "cluster": {"shards": 1, "copies": 2, "workers": 1},
            "workload": {"steps": 120},
            "faults": [{"at": {"step": 20}, "kind": "duplicate", "target": "workers -> nodes",
                        "params": {"percent": 5}, "duration_s": 0.5}],
            "expect": {"checks": ["no-lost-acks", "exactly-once"]}}
    path = tmp_path / "sim-unmodelled.yaml"
    path.write_text(yaml.safe_dump(spec))
    rep = Runner(load_scenario(path), 1, tmp_path / "out", backend="sim", quiet=True).run()
    assert rep["verdict"] == "unknown"
    why = rep["unknown_reasons"]["scenario-ran"]
    assert "duplicate" in why and "not modelled by the simulator" in why
    history = (tmp_path / "out" / "history.jsonl").read_text()
    assert '"f": "fault-error"' in history and '"f": "fault-start"' in history     # recorded as partial


def test_a_killed_workers_cpu_leaves_at_once_and_its_restart_does_not_wait_behind_it(tmp_path: Path) -> None:
    """A worker killed mid-step: its step's CPU job leaves the host's cores with it (before, it
    kept its share to the end and the restarted worker's first job queued behind it)."""
    from dataclasses import replace

    from pschaos.harness.backends.sim.calibration import Calibration

    cal = Calibration.default()
    slow = replace(cal, worker_step_s={"mlp": 10.0}, worker_step_jitter={})     # one step: 10 s of CPU
    be = SimBackend(ClusterSpec(shards=1, copies=2, workers=1), tmp_path / "run", "t-3", seed=3, calibration=slow)
    try:
        be.start(timeout=10, workers_steps=400)
        be.clock.sleep(1.0)
        assert "worker-0" in be.cpu._lines          # in its first step's compute
        be.kill("worker-0")
        assert "worker-0" not in be.cpu._lines and not be.alive("worker-0")
        be.restart("worker-0")
        be.clock.sleep(0.5)
        job = be.cpu._lines["worker-0"][0]
        assert job.started                          # the new incarnation's job runs, none ahead of it
    finally:
        be.teardown()
