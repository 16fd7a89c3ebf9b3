"""Stop (SIGTERM) and restart of a copy in the twin: serve.py's graceful stop, then ShardNode's
start from its local checkpoint, caught up by a delta.

One shard, 3 copies, sync mode, a short update log (16 entries, so 2 s of pushes are past it);
a worker pushes until t=10. shard-0/2 is stopped at t=3 and started again at t=5: it writes its
local checkpoint, gives its lease back and says "stop"; at the restart it loads that checkpoint
("load"), says "start", and the primary brings it back by a delta from the checkpoint's seq (a
"sync" event of kind delta), then into the ISR. shard-0/1 is stopped at t=6.5, its disk wiped,
and started at t=7.5: nothing to load, so it is sent the whole state (a delta since seq 0).
"""
from __future__ import annotations

import pytest

from pschaos.harness.checkers.acks import exactly_once, no_lost_acks
from pschaos.harness.checkers.primaries import single_primary
from pschaos.harness.backends.sim.disk import local_dir
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.psnodes.config import ClusterConfig

STOP_T, RESTART_T, WIPE_T, REWIPED_T, PUSH_UNTIL, END = 3.0, 5.0, 6.5, 7.5, 10.0, 11.0


def run(seed: int) -> tuple[SimShardCluster, dict]:
    cfg = ClusterConfig(cluster_id="sim", etcd="sim://etcd", shards=1, copies=3, workers=1, mode="sync",
                        seed=seed, log_entries=16)
    cl = SimShardCluster(seed, cfg)
    cl.env.process(cl.client().run(until=PUSH_UNTIL))
    out: dict = {}

    def scenario() -> Gen:
        c2, c1 = cl.copies["shard-0/2"], cl.copies["shard-0/1"]
        yield from cl.clock.sleep(STOP_T)
        yield c2.stop()
        out["stopped_t"], out["alive_after_stop"] = cl.env.now, c2.alive
        out["manifest"] = c2.disk.manifest(local_dir(c2.name))
        yield from cl.clock.sleep(RESTART_T - cl.env.now)
        c2.restart()
        out["verified2"] = set(c2.verified)
        yield from cl.clock.sleep(WIPE_T - cl.env.now)
        yield c1.stop()
        c1.wipe_data()
        out["wiped"] = c1.disk.manifest(local_dir(c1.name))
        yield from cl.clock.sleep(REWIPED_T - cl.env.now)
        c1.restart()
        out["verified1"] = set(c1.verified)

    cl.env.process(scenario())
    cl.env.run(until=END)
    cl.final_states()
    return cl, out


@pytest.fixture(scope="module")
def seeded() -> tuple[SimShardCluster, dict]:
    return run(7)


def ev(cl: SimShardCluster, f: str, node: str) -> list[dict]:
    return [e for e in cl.history.events if e["f"] == f and e["node"] == node]


def test_a_stop_writes_the_local_checkpoint_gives_the_lease_back_and_exits(seeded) -> None:
    cl, out = seeded
    (stop,) = ev(cl, "stop", "shard-0/2")
    seq = stop["value"]["seq"]
    assert stop["t"] == out["stopped_t"] and not out["alive_after_stop"]
    # SIGTERM at 3: the checkpoint write (a small blob: ~2 fsyncs) and the revoke; serve.py's
    # server.stop(grace=0.2) returns at once, so the stop does not wait out the grace
    assert STOP_T < stop["t"] < STOP_T + 0.01
    assert out["manifest"]["seq"] == seq and out["manifest"]["node"] == "shard-0/2"
    key = cl.cfg.node_key("shard-0/2")
    revoked = [c for c in cl.etcd.changes if c.key == key and c.kind == "delete"]
    assert [c.cause for c in revoked][:1] == ["revoke"] and revoked[0].t <= stop["t"]


def test_a_restart_loads_its_checkpoint_and_catches_up_by_a_delta(seeded) -> None:
    cl, out = seeded
    seq = ev(cl, "stop", "shard-0/2")[0]["value"]["seq"]
    (load,) = ev(cl, "load", "shard-0/2")
    v = load["value"]
    assert load["t"] == RESTART_T and {k: v[k] for k in ("shard", "seq", "source")} == {"shard": 0, "seq": seq,
                                                                                       "source": "local"}
    assert v["crc32"] == v["manifest_crc32"] and v["read_bytes"] == v["bytes"]    # the file the manifest names, whole
    assert out["verified2"] == {(1, "shard-0/0")}          # verified.json, beside the checkpoint
    starts = ev(cl, "start", "shard-0/2")
    assert len(starts) == 2 and starts[1]["value"]["seq"] == seq and starts[1]["value"]["role"] == "replica"
    (sync,) = [e for e in ev(cl, "sync", "shard-0/0") if e["value"]["dst"] == "shard-0/2"]
    v = sync["value"]
    assert v["from_seq"] == seq and v["kind"] == "delta" and v["kinds"] == ["delta"]
    assert v["to_seq"] > seq + cl.cfg.log_entries and 0 < v["changed_bytes"] <= v["snapshot_bytes"]
    added = [e for e in ev(cl, "isr", "shard-0/0") if e["value"]["added"] == "shard-0/2"]
    # the primary's channel to it has been in gRPC's reconnect backoff for 2 s (pauses of 160-240
    # ms by then, harness/backends/sim/reconnect.py): it is reached at the channel's next attempt
    assert added and RESTART_T < added[0]["t"] < RESTART_T + 0.3


def test_a_wiped_copy_loads_nothing_and_gets_the_whole_state(seeded) -> None:
    cl, out = seeded
    assert out["wiped"] is None and not ev(cl, "load", "shard-0/1") and out["verified1"] == set()
    (sync,) = [e for e in ev(cl, "sync", "shard-0/0") if e["value"]["dst"] == "shard-0/1"]
    v = sync["value"]            # seq 0 is a prefix of every history: a "delta" since 0, all of the state
    assert v["from_seq"] == 0 and v["kind"] == "delta" and v["changed_bytes"] == v["snapshot_bytes"]
    assert ev(cl, "start", "shard-0/1")[1]["value"]["seq"] == 0


def test_every_copy_ends_equal_and_the_checkers_pass(seeded) -> None:
    cl, _ = seeded
    states = [e["value"] for e in cl.history.events if e["f"] == "final-state"]
    assert all(s["alive"] for s in states) and len({s["checksum"] for s in states}) == 1
    assert [s["role"] for s in states] == ["primary", "replica", "replica"]
    for check in (no_lost_acks, single_primary, exactly_once):
        v = check(cl.history.events, {"replication": "sync"})
        assert v.valid is True, (check.__name__, v.details)
    assert run(7)[0].history.events == cl.history.events
