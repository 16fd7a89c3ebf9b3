"""The coordinator and its callers refuse what a migration cannot do safely, and never leave the
sources fenced: async replication is refused by name (review 1b), the source set and id come from
the record the announce swapped and ids never collide (1c), two scale faults at one moment are
refused at load, any failure before the switch (Ctrl-C too) aborts (section 4), and a later
coordinator can abort a migration the record still holds."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pschaos.psnodes.elastic import routing
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.core.routing import Routing, begin
from pschaos.psnodes.elastic.migration import MigrationFailed, Migrator
from pschaos.psnodes.runtime import Runtime
from tests.unit.psnodes.elastic.test_migration_coordinator import LosesAnswers
from pschaos.harness.machinery.tools import REPO

ROOT = REPO


def cfg(mode: str = "sync") -> ClusterConfig:
    return ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=2, max_shards=4, peer_token="p",
                         mode=mode)


def migrator(etcd, nonce: str | None = None) -> tuple[Migrator, list, list]:
    events, calls = [], []
    extra = {"nonce": nonce} if nonce else {}
    m = Migrator(cfg(), etcd=etcd, runtime=Runtime(sleep=lambda s: None), emit=lambda f, v: events.append((f, v)),
                 **extra)
    m._call = lambda shard, req, phase: calls.append((shard, req.op, phase))     # no nodes in a unit test
    return m, events, calls


def test_async_replication_is_refused_by_the_coordinator_naming_the_field() -> None:
    with pytest.raises(MigrationFailed, match="replication: async.*set cluster.replication: sync"):
        Migrator(cfg("async"), etcd=LosesAnswers(0))


def scenario_text(**cluster) -> dict:
    d = yaml.safe_load((ROOT / "scenarios/scale-out-shards.yaml").read_text())
    d["cluster"].update(cluster)
    return d


def load(d: dict, tmp_path: Path):
    from pschaos.harness.run.scenario import load_scenario
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    return load_scenario(p)


def test_a_scenario_scaling_shards_with_async_replication_is_refused_at_load(tmp_path) -> None:
    load(scenario_text(), tmp_path)
    with pytest.raises(Exception, match="cluster.replication: async cannot run a live shard migration"):
        load(scenario_text(replication="async"), tmp_path)


def test_two_scale_faults_at_one_moment_are_refused_at_load(tmp_path) -> None:
    d = scenario_text()
    d["faults"].append({"at": {"step": 80}, "kind": "scale-in-shards", "params": {"to": 2}})
    with pytest.raises(Exception, match="two scale-\\*-shards faults at the same `at`"):
        load(d, tmp_path)


class Moves(LosesAnswers):
    """An etcd whose record another coordinator switches (to epoch 1 over 0,1,2) right after our first read."""

    def __init__(self, cfg: ClusterConfig) -> None:
        super().__init__(0)
        self.cfg, self.reads = cfg, 0

    def get(self, key: str):
        got = super().get(key)
        self.reads += 1
        if self.reads == 1:
            rec, rev = routing.read(self._plain(), self.cfg)
            routing.swap(self._plain(), self.cfg, rev, Routing(1, (0, 1, 2), None))
        return got

    def _plain(self):
        me = self

        class P:
            def get(self, key):
                return LosesAnswers.get(me, key)

            def cas(self, *a, **k):
                return LosesAnswers.cas(me, *a, **k)
        return P()


def test_the_source_set_and_epoch_are_the_swapped_records_and_ids_carry_the_nonce() -> None:
    c = cfg()
    m, events, _ = migrator(Moves(c), nonce="abcd")

    class Stop(Exception):
        pass

    def stop(out):
        raise Stop("copy failed")
    m._copy = stop
    with pytest.raises(Stop):
        m.run((0, 1, 2, 3))
    start = next(v for f, v in events if f == "migration-start")
    assert start["src"] == [0, 1, 2] and start["routing_epoch"] == 1, start
    assert start["migration"].endswith(".abcd")
    m2, _, _ = migrator(LosesAnswers(0))
    assert m2.nonce != m.nonce


def test_any_failure_before_the_switch_aborts_and_ctrl_c_too() -> None:
    for exc in (KeyboardInterrupt(), RuntimeError("a bug"), MigrationFailed("gave up")):
        etcd = LosesAnswers(0)
        m, events, calls = migrator(etcd)

        def boom(out, base, exc=exc):
            raise exc
        m._handoff = boom
        m._copy = lambda out: {}
        if isinstance(exc, MigrationFailed):
            out = m.run((0, 1, 2))
            assert out.aborted and not out.switched
        else:
            with pytest.raises(type(exc)):
                m.run((0, 1, 2))
        rec, _ = routing.read(etcd, m.cfg)
        assert rec.migration is None and rec.shards == (0, 1), rec
        assert [f for f, _ in events if f == "migration-abort"], events
        assert {s for s, op, _ in calls if phase_is(op, "UNFENCE")} == {0, 1, 2}


def phase_is(op, name: str) -> bool:
    from pschaos.psnodes.proto import ps_pb2
    return op == getattr(ps_pb2.MigrateRequest, name)


def test_a_later_coordinator_aborts_the_migration_the_record_still_holds() -> None:
    etcd = LosesAnswers(0)
    m, _, _ = migrator(etcd)
    m._swap(lambda r: begin(r, "0.1.dead", (0, 1, 2)), "announce")      # its coordinator died here
    with pytest.raises(MigrationFailed, match="still in progress"):
        migrator(etcd)[0].run((0, 1, 2))
    m2, events, calls = migrator(etcd)
    assert m2.abort_in_progress() == "0.1.dead"
    assert routing.read(etcd, m2.cfg)[0].migration is None
    assert {s for s, op, _ in calls if phase_is(op, "UNFENCE")} == {0, 1, 2}
    assert m2.abort_in_progress() is None


def test_cluster_scale_without_shards_is_an_error_naming_the_flag(tmp_path, capsys) -> None:
    """It used to scale silently to 2 (the flag's default for `up`)."""
    from pschaos.harness.commands.cli import main
    assert main(["cluster", "scale", "--dir", str(tmp_path)]) == 2
    assert "--shards is required" in capsys.readouterr().err
