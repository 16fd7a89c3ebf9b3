"""The twin runs the same restore rule as the real node (psnodes/core/routing.py after_restore, via
psnodes/server/ownership.py restore_routing): a copy restoring its shard from a checkpoint written before
a routing switch adopts the switched record before it serves, and never acks a key that moved.

Shard 0 of a 2-shard cluster, 3 copies, sync mode; a worker pushes MOVES (shard 0's under (0, 1),
shard 2's under (0, 1, 2)) by routing epoch 0 until t=13. shard-0/2 is killed at t=1, both ISR
copies at t=5; at t=5.2 a switch to routing epoch 1 over (0, 1, 2) lands in etcd (the
coordinator's ROUTE found no live primary of shard 0 to tell). shard-0/2 restarts empty at t=5.5
and restores from the shared checkpoint, which still holds MOVES at routing epoch 0.
"""
from __future__ import annotations

import pytest

from pschaos.harness.backends.sim.pushclient import SimPushClient, SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.psnodes.elastic import routing
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.placement import owner
from tests.unit.harness.backends.sim.test_copy_restore import ev

MOVES = "layer24.weight"
KILL_ONE_T, KILL_ISR_T, SWITCH_T, RESTART_T, PUSH_UNTIL, END = 1.0, 5.0, 5.2, 5.5, 13.0, 14.0


def run(seed: int) -> SimShardCluster:
    cfg = ClusterConfig(cluster_id="sim", etcd="sim://etcd", shards=2, copies=3, workers=1, mode="sync", seed=seed)
    cl = SimShardCluster(seed, cfg)
    cl.env.process(SimPushClient(cl.env, cl.clock, cl.etcd, cl.net, cfg, cl.copies, cl.history, cl.rng,
                                 tensor=MOVES).run(until=PUSH_UNTIL))
    c = cl.copies

    def scenario() -> Gen:
        yield from cl.clock.sleep(KILL_ONE_T)
        c["shard-0/2"].kill()
        yield from cl.clock.sleep(KILL_ISR_T - cl.env.now)
        c["shard-0/0"].kill()
        c["shard-0/1"].kill()
        yield from cl.clock.sleep(SWITCH_T - cl.env.now)
        cl.etcd.put(routing.key(cfg), routing.to_json(Routing(1, (0, 1, 2))))
        yield from cl.clock.sleep(RESTART_T - cl.env.now)
        c["shard-0/2"].restart()

    cl.env.process(scenario())
    cl.env.run(until=END)
    return cl


@pytest.fixture(scope="module")
def cl() -> SimShardCluster:
    return run(7)


def test_the_key_moves_as_the_test_assumes() -> None:
    assert (owner(MOVES, (0, 1)), owner(MOVES, (0, 1, 2))) == (0, 2)


def test_the_restored_copy_adopts_the_switched_record_before_it_serves(cl) -> None:
    (restore,) = ev(cl, "restore")
    assert restore["node"] == "shard-0/2" and restore["t"] > RESTART_T
    store = cl.copies["shard-0/2"].store
    assert (store.routing_epoch, store.shards) == (1, (0, 1, 2)) and MOVES not in store.dense
    (rr,) = ev(cl, "restore-routing")
    assert rr["t"] == restore["t"] and rr["value"]["routing_epoch"] == 1 and rr["value"]["epoch"] == 2


def test_no_push_of_the_moved_key_is_acked_after_the_restore(cl) -> None:
    t = ev(cl, "restore")[0]["t"]
    oks = [e for e in ev(cl, "push") if e["type"] == "ok" and MOVES in e["value"]["keys"]]
    assert any(e["t"] < KILL_ISR_T for e in oks), "the worker never pushed before the loss"
    late = [e["value"] for e in oks if e["t"] > t]
    assert not late, f"the restored copy acked {len(late)} pushes of a key that moved to shard 2: {late[:2]}"
    refused = [e for e in ev(cl, "push") if e["type"] == "fail" and e["t"] > t]
    assert refused and all("stale routing epoch" in e["value"]["error"] for e in refused)
