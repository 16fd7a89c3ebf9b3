"""The Backend protocol is the runner's whole view of a cluster: ProcessBackend (and the in-memory
fake the runner is tested against) implement every method of it, with the same signature."""
from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from pschaos.harness.backends.base import Backend
from pschaos.harness.backends.docker.backend import DockerBackend
from pschaos.harness.backends.process.backend import ProcessBackend
from pschaos.harness.history.clock import WALL, Clock, WallClock, clock_of
from pschaos.harness.backends.cluster import ClusterSpec

from tests.unit.fake_backend import FakeBackend, ManualClock


def protocol_methods() -> dict[str, inspect.Signature]:
    return {n: inspect.signature(f) for n, f in vars(Backend).items()
            if callable(f) and not n.startswith("_")}


def shape(sig: inspect.Signature) -> list[tuple]:
    """Names, kinds and defaults: what a caller relies on (annotations are strings here)."""
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


def test_protocol_names_what_the_runner_needs():
    assert {"status", "final_state", "checkpoint_scan", "wipe_data", "checkpoint_writes", "links", "link_fault",
            "shard_nodes", "kill", "restart", "routing", "events_path", "event_files",
            "discard_data"} <= set(protocol_methods())
    assert "audit" in inspect.signature(Backend.status).parameters
    for name in protocol_methods():
        assert (getattr(Backend, name).__doc__ or "").strip(), f"Backend.{name} has no docstring"


@pytest.mark.parametrize("cls", [ProcessBackend, DockerBackend, FakeBackend])
def test_backend_implements_every_protocol_method_with_its_signature(cls):
    for name, sig in protocol_methods().items():
        impl = getattr(cls, name, None)
        assert callable(impl), f"{cls.__name__} lacks {name}"
        assert shape(inspect.signature(impl)) == shape(sig), f"{cls.__name__}.{name}{inspect.signature(impl)} != {sig}"


def make_backend(cls, run_dir):
    return ProcessBackend(ClusterSpec(), run_dir, "r", 1) if cls is ProcessBackend else \
        FakeBackend(ClusterSpec(), run_dir, ManualClock())


@pytest.mark.parametrize("cls", [ProcessBackend, FakeBackend])
def test_event_files_are_what_the_cluster_wrote_without_the_runners_own(tmp_path, cls):
    be = make_backend(cls, tmp_path / "run")
    assert be.event_files() == []                      # nothing started, nothing written
    for name in ("harness", "shard-0/1", "worker-0", "shard-0/0"):
        path = be.events_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"t": 0, "node": "%s", "type": "info", "f": "x", "value": {}}\n' % name)
    files = be.event_files()
    assert files == sorted(files) and be.events_path("harness") not in files
    assert {be.events_path(n) for n in ("shard-0/0", "shard-0/1", "worker-0")} <= set(files)
    assert all(isinstance(f, Path) for f in files)


@pytest.mark.parametrize("cls", [ProcessBackend, FakeBackend])
def test_discard_data_is_safe_before_start_and_keeps_the_events(tmp_path, cls):
    be = make_backend(cls, tmp_path / "run")
    be.discard_data()                                  # nothing was started: a no-op
    ev = be.events_path("shard-0/0")
    ev.parent.mkdir(parents=True, exist_ok=True)
    ev.write_text("")
    be.discard_data()
    be.discard_data()                                  # and again
    assert ev.exists() and be.event_files() == [ev]


def test_process_backend_discards_node_data_checkpoints_and_etcd_data_only(tmp_path):
    be = ProcessBackend(ClusterSpec(), tmp_path, "r", 1)
    kept = [tmp_path / "logs" / "shard-0-0.log", be.events_path("worker-0"), be.events_path("harness"),
            tmp_path / "cluster.json"]
    gone = [be.work_dir / "shard-0-0" / "store.bin", be.work_dir / "checkpoints" / "shard-0" / "MANIFEST",
            tmp_path / "etcd-data" / "member" / "wal"]
    for f in kept + gone:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    be.discard_data()
    assert all(f.exists() for f in kept)
    assert not be.work_dir.exists() and not (tmp_path / "etcd-data").exists()
    assert be.event_files() == [be.events_path("worker-0")]


def test_fake_backend_discards_its_own_disks(tmp_path):
    be = FakeBackend(ClusterSpec(), tmp_path, ManualClock())
    be.start()
    assert (be.disk("shard-0/0") / "store").exists()
    assert be.events_path(be.routing()[0].primary) in be.event_files()      # its promote
    be.discard_data()
    assert be.discarded and not (tmp_path / "disks").exists() and be.event_files()


def test_process_backend_is_a_backend_on_the_wall_clock(tmp_path):
    be = ProcessBackend(ClusterSpec(), tmp_path, "r", 1)
    assert isinstance(be, Backend)
    assert be.clock is WALL and clock_of(be) is WALL and isinstance(be.clock, Clock)
    assert be.links() is None           # not proxied: link faults are refused by name


def test_fake_backend_is_a_backend(tmp_path):
    be = FakeBackend(ClusterSpec(), tmp_path, ManualClock())
    assert isinstance(be, Backend) and isinstance(be.clock, Clock)


def test_clock_of_falls_back_to_the_wall_clock():
    assert clock_of(object()) is WALL


def test_wall_clock_waits_until_a_predicate_or_its_timeout():
    c = WallClock()
    t = c.monotonic()
    assert c.wait_until(lambda: True, 5.0) is True and c.monotonic() - t < 0.5
    t = c.monotonic()
    assert c.wait_until(lambda: False, 0.05, 0.01) is False and c.monotonic() - t >= 0.05
    assert abs(c.now() - __import__("time").time()) < 1.0


def test_manual_clock_moves_only_when_its_owner_sleeps():
    c = ManualClock(start=10.0)
    seen = []
    c.listeners.append(seen.append)
    c.sleep(0.5)
    assert c.now() == c.monotonic() == 10.5 and seen == [10.5]
    n = {"calls": 0}

    def third() -> bool:
        n["calls"] += 1
        return n["calls"] >= 3
    assert c.wait_until(third, 10.0, 0.25) is True and c.now() == 11.0
    assert c.wait_until(lambda: False, 1.0, 0.3) is False and c.now() == 12.0
