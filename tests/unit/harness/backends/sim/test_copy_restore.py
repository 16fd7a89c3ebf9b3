"""Restore in the twin (psnodes/replication/election.py's maybe_restore): every ISR copy is gone, so a live
copy restores the shard from its shared checkpoint, under a new epoch, and says what was lost.

One shard, 3 copies, sync mode; a worker pushes until t=13. shard-0/2 is killed at t=1 (it
leaves the ISR); the primary publishes shared checkpoints every 2 s; at t=5 both ISR copies
are killed. shard-0/2 is restarted at t=5.5 with nothing on its disk: it is not eligible, so it
posts a restore candidacy, waits until the ISR copies' leases expired plus a lease TTL and a
suspect period, then restores from the shared checkpoint (newer than its empty state): a
"restore" event and the etcd loss key, a promotion at epoch 2 with itself as the ISR. The acks
above the checkpoint's seq are lost and reported. The two old copies restarted at t=11.5 come
back as replicas of epoch 2.
"""
from __future__ import annotations

import json

import pytest

from pschaos.harness.checkers.acks import no_lost_acks
from pschaos.harness.checkers.primaries import single_primary
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.psnodes.proto import ps_pb2

KILL_ONE_T, KILL_ISR_T, RESTART_T, BACK_T, PUSH_UNTIL, END = 1.0, 5.0, 5.5, 11.5, 13.0, 15.0


def run(seed: int) -> SimShardCluster:
    cl = SimShardCluster(seed)
    cl.env.process(cl.client().run(until=PUSH_UNTIL))
    c = cl.copies

    def kill(*names: str) -> None:
        for n in names:
            c[n].kill()
            cl.history.record("kill", {"target": n})

    def scenario() -> Gen:
        yield from cl.clock.sleep(KILL_ONE_T)
        kill("shard-0/2")
        yield from cl.clock.sleep(KILL_ISR_T - cl.env.now)
        kill("shard-0/0", "shard-0/1")
        yield from cl.clock.sleep(RESTART_T - cl.env.now)
        c["shard-0/2"].restart()
        yield from cl.clock.sleep(BACK_T - cl.env.now)
        c["shard-0/0"].restart()
        c["shard-0/1"].restart()

    cl.env.process(scenario())
    cl.env.run(until=END)
    cl.final_states()
    return cl


@pytest.fixture(scope="module")
def cl() -> SimShardCluster:
    return run(7)


def ev(cl: SimShardCluster, f: str) -> list[dict]:
    return [e for e in cl.history.events if e["f"] == f]


def test_the_live_copy_restores_from_the_last_shared_checkpoint(cl) -> None:
    last = [e for e in ev(cl, "checkpoint") if e["t"] < KILL_ISR_T][-1]["value"]
    (restore,) = ev(cl, "restore")
    v = restore["value"]
    assert restore["node"] == "shard-0/2"
    assert v["loaded"]["crc32"] == v["loaded"]["manifest_crc32"] and v["loaded"]["seq"] == last["seq"]
    assert {k: v[k] for k in v if k not in ("time", "loaded")} == {
        "shard": 0, "epoch": 2, "restored_seq": last["seq"], "restored_seq_epoch": last["epoch"],
        "source": f"checkpoint@{last['seq']}", "previous_epoch": 1, "previous_primary": "shard-0/0"}
    assert v["time"] == pytest.approx(cl.clock.epoch + restore["t"])
    # the ISR copies' leases expire within a TTL of the kill; then a TTL and a suspect period pass
    ttl, sus = cl.cfg.lease_ttl_s, cl.cfg.suspect_s
    assert KILL_ISR_T + ttl + sus < restore["t"] < KILL_ISR_T + 2 * ttl + sus + 0.2
    assert json.loads(cl.etcd.get(cl.cfg.loss_key(0, 2)).value) == v
    promote = ev(cl, "promote")[-1]
    assert (promote["t"], promote["node"], promote["value"]["epoch"]) == (restore["t"], "shard-0/2", 2)
    assert promote["value"]["isr"] == ["shard-0/2"] and promote["value"]["seq"] == last["seq"]


def test_it_reports_where_it_came_from(cl) -> None:
    st = cl.copies["shard-0/2"].status(ps_pb2.StatusRequest())
    assert st.restored_from == ev(cl, "restore")[0]["value"]["source"] and st.role == "primary"
    final = {e["node"]: e["value"] for e in ev(cl, "final-state")}
    assert final["shard-0/2"]["restored_from"] == st.restored_from
    assert final["shard-0/0"]["restored_from"] == final["shard-0/1"]["restored_from"] == ""


def test_exactly_the_acks_above_the_checkpoint_are_lost_and_the_checker_says_so(cl) -> None:
    seq = ev(cl, "restore")[0]["value"]["restored_seq"]
    oks = [e["value"] for e in ev(cl, "push") if e["type"] == "ok"]
    final = {e["node"]: e["value"] for e in ev(cl, "final-state")}
    (ranges,) = final["shard-0/2"]["applied"].values()
    kept = {v["req_id"] for v in oks if any(lo <= v["req_id"] <= hi for lo, hi in ranges)}
    lost = [v for v in oks if v["req_id"] not in kept]
    assert lost and all(v["epoch"] == 1 and v["seq"] > seq for v in lost)
    assert all(v["req_id"] in kept for v in oks if v["epoch"] == 1 and v["seq"] <= seq)
    verdict = no_lost_acks(cl.history.events, {"replication": "sync"})
    assert verdict.valid is False and verdict.details["lost_keys"] == len(lost)
    assert single_primary(cl.history.events, {}).valid is True


def test_the_old_copies_come_back_as_replicas_of_the_new_epoch(cl) -> None:
    final = [e["value"] for e in ev(cl, "final-state")]
    assert all(s["alive"] and s["epoch"] == 2 for s in final)
    assert [s["role"] for s in final] == ["replica", "replica", "primary"]
    assert len({s["checksum"] for s in final}) == 1
    added = sorted(e["value"]["added"] for e in ev(cl, "isr") if e["value"]["epoch"] == 2)
    assert added == ["shard-0/0", "shard-0/1"]


def test_a_seed_replays_the_restore_exactly(cl) -> None:
    assert run(7).history.events == cl.history.events
