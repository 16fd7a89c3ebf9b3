"""The twin's shell of elastic shards: SimCopy serving Migrate and checking routing epochs, the
stubs carrying StaleRouting as ABORTED, shard groups started at run time, psnodes' migration
coordinator run in virtual time, and a kill timed against the hand-off. And one core, two shells: the same Migrate steps on a real
ShardNode and on a SimCopy leave the same state."""
from __future__ import annotations

import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from pschaos.harness.history.events import read_events
from pschaos.harness.run.runner import Runner
from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.backends.sim.backend import SimBackend
from pschaos.harness.backends.sim.elastic import MIGRATOR
from pschaos.harness.backends.sim.transport import SimEtcdClient, SimPool, SimStatusError, SimStub
from pschaos.psnodes.store import moving
from pschaos.psnodes.elastic import routing
from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.errors import STALE_ROUTING, StaleRouting
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.placement import owner
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.runtime import Runtime
from tests.unit.helpers import only

Op = ps_pb2.MigrateRequest
NAMES = [f"layer{i}.weight" for i in range(40)]


@pytest.fixture
def backend(tmp_path: Path):
    be = SimBackend(ClusterSpec(shards=2, copies=2, workers=0, max_shards=3), tmp_path / "run", "t-m", seed=7)
    try:
        yield be
    finally:
        be.teardown()


def never() -> bool:
    return False


def client(be: SimBackend, name: str = "worker-0") -> PSClient:
    """psnodes' own client on the simulator's transport, in the calling simulated thread."""
    rt = Runtime(monotonic=be.clock.monotonic, sleep=be.clock.sleep, time=be.clock.now, pid=lambda: 9,
                 pool=lambda n, prefix: SimPool(be.vt, f"{name}-{prefix}"))
    return PSClient(be.cfg.client_view(), name, None, EventLog(None, name), runtime=rt, retry_budget=5.0,
                    etcd=SimEtcdClient(be, name, never), stub_factory=lambda node: SimStub(be, name, node, never))


def trained(be: SimBackend) -> PSClient:
    """The cluster up, NAMES initialised through a client on shards 0 and 1; the client."""
    be.start(timeout=10)
    c = client(be)
    c.wait_ready(5)
    c.init_dense(values())
    return c


def values() -> dict[str, np.ndarray]:
    return {n: np.full(4, float(i), np.float32) for i, n in enumerate(NAMES)}


def primary(be: SimBackend, shard: int):
    return be.copies[be.routing()[shard].primary]


def test_the_coordinator_in_virtual_time_moves_keys_with_their_values_to_every_copy_of_the_new_shard(backend):
    be = backend
    c = trained(be)
    c.push({n: np.ones(4, np.float32) for n in NAMES}, {})
    moved = [n for n in NAMES if owner(n, (0, 1, 2)) == 2]
    assert moved
    before = {n: primary(be, owner(n, (0, 1))).store.dense[n].copy() for n in moved}
    be.start_shard_groups([2])
    assert sorted(be.active_shards()) == [0, 1, 2] and "shard-2/1" in be.nodes()
    events: list[tuple[str, dict]] = []
    out = be.migrate_shards([0, 1, 2], lambda f, v: events.append((f, v)))
    assert out.switched and out.routing_epoch == 1 and not out.aborted and out.keys >= len(moved)
    assert [f for f, _ in events] == ["migration-start", "migration-copy-start", "migration-copy-end",
                                      "migration-fence", "migration-handoff", "migration-switch", "migration-done"]
    assert routing.read(be.etcd, be.cfg)[0] == Routing(1, (0, 1, 2), None)
    for node in be.cfg.shard_nodes(2):          # the primary and its replica: the import is replicated
        store = be.copies[node].store
        assert store.routing_epoch == 1
        for n in moved:
            assert moving.owns(store, n)
            np.testing.assert_array_equal(store.dense[n], before[n])
    for n in moved:
        assert not moving.owns(primary(be, owner(n, (0, 1))).store, n)      # the source gave it away


def test_a_fenced_key_and_a_stale_routing_epoch_are_refused_ABORTED_and_the_client_reroutes(backend):
    be = backend
    c = trained(be)
    be.start_shard_groups([2])
    moving_name = next(n for n in NAMES if owner(n, (0, 1, 2)) == 2)
    src = owner(moving_name, (0, 1))
    stub = SimStub(be, MIGRATOR, be.routing()[src].primary, never)
    stub.Migrate(Op(op=Op.FENCE, shard=src, migration="m1", src=[0, 1], dst=[0, 1, 2]))
    upd = ps_pb2.Update(worker="worker-0", incarnation=1, req_id=1, dense=[tensor_to_pb(moving_name, np.ones(4, np.float32))])
    push = SimStub(be, "worker-0", be.routing()[src].primary, never)
    with pytest.raises(SimStatusError) as e:
        push.Push(ps_pb2.PushRequest(shard=src, epoch=be.routing()[src].epoch, update=upd, routing_epoch=0))
    assert e.value.code() is grpc.StatusCode.ABORTED and e.value.details().startswith(STALE_ROUTING)
    stub.Migrate(Op(op=Op.UNFENCE, shard=src, migration="m1"))
    out = be.migrate_shards([0, 1, 2], lambda f, v: None)
    assert out.switched
    with pytest.raises(SimStatusError) as e:     # routed by epoch 0 while the shard is at 1
        push.Push(ps_pb2.PushRequest(shard=src, epoch=be.routing()[src].epoch, update=upd, routing_epoch=0))
    assert e.value.code() is grpc.StatusCode.ABORTED
    assert c.routing.epoch == 0
    replies = c.push({moving_name: np.ones(4, np.float32)}, {})      # stale -> re-read -> re-routed to shard 2
    assert c.routing.epoch == 1
    acked = [r for r in replies.values() if r is not None]
    assert acked and all(r.routing_epoch == 1 for r in acked) and {r.node for r in acked} <= set(be.cfg.shard_nodes(2))


def test_a_call_routed_by_a_newer_epoch_makes_the_primary_adopt_the_record_through_its_log(backend):
    be = backend
    be.start(timeout=10)
    rec, rev = routing.read(be.etcd, be.cfg)
    assert routing.swap(be.etcd, be.cfg, rev, Routing(1, (0, 1), None))
    r0 = be.routing()[0]
    stub = SimStub(be, "worker-0", r0.primary, never)
    name = next(n for n in NAMES if owner(n, (0, 1)) == 0)
    init = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb(name, np.zeros(4, np.float32))])
    rep = stub.Push(ps_pb2.PushRequest(shard=0, epoch=r0.epoch, update=init, routing_epoch=1))
    assert rep.routing_epoch == 1
    be.clock.sleep(0.5)
    assert [be.copies[n].store.routing_epoch for n in be.cfg.shard_nodes(0)] == [1, 1]   # replicated ROUTE
    with pytest.raises(SimStatusError) as e:
        stub.Push(ps_pb2.PushRequest(shard=0, epoch=r0.epoch, update=init, routing_epoch=2))   # not in etcd
    assert e.value.code() is grpc.StatusCode.UNAVAILABLE and "not in etcd" in e.value.details()


HANDOFF_KILL = """\
name: handoff-kill
cluster: {shards: 2, copies: 3, workers: 1, replication: sync, training: async, model: mlp}
workload: {steps: 200}
faults:
  - at: {step: 40}
    kind: scale-out-shards
    params: {to: 3, hold_s: 0.3}
  - at: {step: 40}
    kind: kill
    target: primary(shard=0)
    params: {during: handoff}
    duration_s: 0.5
expect:
  checks: [no-lost-acks, single-owner, single-primary, exactly-once, replicas-match]
  metrics: ["migrations == 1", "failovers >= 1"]
"""


def test_a_kill_during_the_handoff_lands_while_the_sources_are_fenced_and_the_migration_still_switches(tmp_path):
    path = tmp_path / "handoff-kill.yaml"
    path.write_text(HANDOFF_KILL)
    rep = Runner(only(load_scenario(path), "a test of the hand-off's mechanics under a kill: the checks it names"),
                 1, tmp_path / "out", "sim", quiet=True).run()
    assert rep["verdict"] == "pass", rep.get("unknown_reasons") or rep["checks"]
    hist = read_events(tmp_path / "out" / "history.jsonl")
    (kill,) = [e["value"] for e in hist if e["f"] == "fault-start" and e["value"]["kind"] == "kill"]
    (fence,) = [e["t"] for e in hist if e["f"] == "migration-fence"]
    (switch,) = [e["t"] for e in hist if e["f"] == "migration-switch"]
    promoted = [e["t"] for e in hist if e["f"] == "promote" and e["value"]["shard"] == 0 and e["value"]["epoch"] > 1]
    assert kill["caught_migrating"] == "fenced"
    assert promoted and fence < promoted[0] < switch          # the fenced source failed over, then the switch


# ----------------------------------------------------------------- one core, two shells
class Shells:
    """The same shard copies twice: real ShardNodes (no gRPC, no etcd) and SimCopies (one copy per
    shard, so both ack at once), driven with the same requests."""

    def __init__(self, be: SimBackend) -> None:
        self.be = be
        self.real = {}
        for s in (0, 1, 2):
            n = f"shard-{s}/0"
            node = ShardNode(be.cfg, n, {}, etcd=None, events=EventLog(None, n))
            node.become_primary(ShardRecord(epoch=1, primary=n, isr=[n]))
            self.real[s] = node

    def sim(self, s: int):
        return self.be.copies[f"shard-{s}/0"]

    def both(self, s: int, method: str, req):
        """(real reply or error, sim reply or error)."""
        out = []
        try:
            out.append(getattr(self.real[s], method)(req, time.monotonic() + 5))
        except Exception as e:  # noqa: BLE001 - the error is the outcome compared
            out.append(e)
        try:
            out.append(self.be.vt.run_process(getattr(self.sim(s), method)(req, self.be.env.now + 5)))
        except Exception as e:  # noqa: BLE001
            out.append(e)
        return out

    def same_state(self) -> None:
        for s in (0, 1, 2):
            assert self.real[s].store.checksum() == self.sim(s).store.checksum(), f"shard {s}"
            assert self.real[s].store.routing_epoch == self.sim(s).store.routing_epoch


def test_the_same_migrate_steps_on_a_real_node_and_a_simulated_copy_leave_the_same_state(tmp_path: Path):
    be = SimBackend(ClusterSpec(shards=2, copies=1, workers=0, max_shards=3), tmp_path / "run", "t-m2", seed=7)
    try:
        be.start(timeout=10)
        be.start_shard_groups([2])
        sh = Shells(be)
        name = next(n for n in NAMES if owner(n, (0, 1)) == 0 and owner(n, (0, 1, 2)) == 2)
        stays = next(n for n in NAMES if owner(n, (0, 1)) == 0 and owner(n, (0, 1, 2)) == 0)
        init = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb(n, values()[n]) for n in (name, stays)])
        sh.both(0, "push", ps_pb2.PushRequest(shard=0, epoch=1, update=init))

        def grad(req_id: int, *names: str, shard: int = 0, epoch: int = 0) -> ps_pb2.PushRequest:
            upd = ps_pb2.Update(worker="worker-0", incarnation=1, req_id=req_id,
                                dense=[tensor_to_pb(n, np.ones(4, np.float32)) for n in names])
            return ps_pb2.PushRequest(shard=shard, epoch=1, update=upd, routing_epoch=epoch)
        sh.both(0, "push", grad(1, name, stays))
        sh.same_state()
        mv = dict(migration="m", src=[0, 1], dst=[0, 1, 2], to=2)
        real, sim = sh.both(0, "migrate", Op(op=Op.EXPORT, shard=0, part="copy", **mv))
        assert (real.state, real.keys, real.key_bytes, real.seq) == (sim.state, sim.keys, sim.key_bytes, sim.seq)
        assert real.keys == 1
        sh.both(2, "migrate", Op(op=Op.IMPORT, shard=2, migration="m", part="copy", from_shard=0, state=real.state))
        sh.both(0, "push", grad(2, name))
        sh.both(0, "migrate", Op(op=Op.FENCE, shard=0, migration="m", src=[0, 1], dst=[0, 1, 2]))
        errs = sh.both(0, "push", grad(3, name))
        assert all(isinstance(e, StaleRouting) for e in errs), errs
        real, sim = sh.both(0, "migrate", Op(op=Op.EXPORT, shard=0, part="delta", since_seq=real.seq,
                                             since_epoch=real.seq_epoch, **mv))
        assert real.state == sim.state and not real.full
        sh.both(2, "migrate", Op(op=Op.IMPORT, shard=2, migration="m", part="delta", from_shard=0, state=real.state))
        for s in (0, 1, 2):
            sh.both(s, "migrate", Op(op=Op.ROUTE, shard=s, migration="m", dst=[0, 1, 2], routing_epoch=1))
        sh.same_state()
        errs = sh.both(0, "push", grad(4, stays))                      # routed by epoch 0: stale
        assert all(isinstance(e, StaleRouting) for e in errs), errs
        dup = grad(2, name, shard=2, epoch=1)      # applied on shard 0 before the fence, re-routed with its key
        dup.update.origin = 0
        real, sim = sh.both(2, "push", dup)
        assert real.duplicate and sim.duplicate and real.applied_on == sim.applied_on == 0
        real, sim = sh.both(2, "push", grad(1, name, shard=2, epoch=1))
        assert not real.duplicate and not sim.duplicate and real.routing_epoch == sim.routing_epoch == 1
        sh.same_state()
    finally:
        be.teardown()
