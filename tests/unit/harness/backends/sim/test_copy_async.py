"""Async mode in the twin: the primary acks before its replicas have the update, so killing it
loses exactly the acks in the unreplicated window, and nothing else.

One shard, 3 copies, async mode; the links from the primary to its replicas carry 30 ms of
latency, so replication trails the acks by a few pushes; a worker pushes until t=10 and the
primary is killed at t=5. A replica is promoted at epoch 2 within a second; the acks it does
not hold all have a seq above its seq at promotion, no further than the old primary's seq at the
kill (and max_lag + 1); the harness's checkers accept exactly those, and a seed replays the run.
"""
from __future__ import annotations

import pytest

from pschaos.harness.checkers.acks import exactly_once, no_lost_acks
from pschaos.harness.checkers.primaries import single_primary
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.psnodes.config import ClusterConfig

KILL_T, PUSH_UNTIL, END = 5.0, 10.0, 12.0


def run(seed: int) -> tuple[SimShardCluster, dict]:
    cfg = ClusterConfig(cluster_id="sim", etcd="sim://etcd", shards=1, copies=3, workers=1, mode="async", seed=seed)
    cl = SimShardCluster(seed, cfg)
    cl.net.add_fault("latency", ["shard-0/0->shard-0/1", "shard-0/0->shard-0/2"], {"latency_ms": 30})
    cl.env.process(cl.client().run(until=PUSH_UNTIL))
    out: dict = {}

    def kill() -> Gen:
        yield from cl.clock.sleep(KILL_T)
        old = cl.copies["shard-0/0"]
        out["seq_at_kill"] = old.store.seq
        out["replicated_at_kill"] = max(old.peer_seq.get(p, 0) for p in ("shard-0/1", "shard-0/2"))
        old.kill()
        cl.history.record("kill", {"target": old.name})

    cl.env.process(kill())
    cl.env.run(until=END)
    cl.final_states()
    return cl, out


@pytest.fixture(scope="module")
def seeded() -> tuple[SimShardCluster, dict]:
    return run(7)


def test_losses_are_only_the_acks_of_the_unreplicated_window(seeded) -> None:
    cl, out = seeded
    (promote,) = [e for e in cl.history.events if e["f"] == "promote" and e["value"]["epoch"] == 2]
    assert KILL_T < promote["t"] < KILL_T + 1.0
    at = promote["value"]["seq"]
    assert out["replicated_at_kill"] <= at < out["seq_at_kill"]        # the replicas trailed at the kill
    oks = [e["value"] for e in cl.history.events if e["f"] == "push" and e["type"] == "ok"]
    final = {e["node"]: e["value"] for e in cl.history.events if e["f"] == "final-state"}
    (ranges,) = final[promote["node"]]["applied"].values()
    lost = [v for v in oks if not any(lo <= v["req_id"] <= hi for lo, hi in ranges)]
    assert [v["seq"] for v in lost] == list(range(at + 1, at + 1 + len(lost))) and len(lost) == 2
    assert all(v["epoch"] == 1 and at < v["seq"] <= min(out["seq_at_kill"], at + cl.cfg.max_lag + 1)
               for v in lost)
    assert all(v["epoch"] == 2 for v in oks if v["req_id"] > lost[-1]["req_id"])


def test_the_checkers_allow_exactly_those_and_the_live_copies_agree(seeded) -> None:
    cl, _ = seeded
    ctx = {"replication": "async", "max_lag": cl.cfg.max_lag}
    v = no_lost_acks(cl.history.events, ctx)
    assert v.valid is True and v.details["lost_keys"] == v.details["allowed"] == 2
    for check in (single_primary, exactly_once):
        assert check(cl.history.events, ctx).valid is True
    assert no_lost_acks(cl.history.events, {"replication": "sync"}).valid is False
    live = [e["value"] for e in cl.history.events if e["f"] == "final-state" and e["value"]["alive"]]
    assert len(live) == 2 and len({s["checksum"] for s in live}) == 1


def test_a_seed_replays_the_async_run_exactly(seeded) -> None:
    cl, _ = seeded
    assert run(7)[0].history.events == cl.history.events
