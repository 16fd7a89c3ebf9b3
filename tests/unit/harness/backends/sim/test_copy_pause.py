"""Pause (SIGSTOP) and resume (SIGCONT) of the primary in the twin: a failover, then the old
primary steps down and catches up.

One shard, 3 copies, sync mode; a worker pushes until t=10; the primary is paused at t=3 and
resumed at t=7. While paused it makes no progress: its keepalives stop, so etcd expires its
lease; calls to it get no answer: one whose deadline comes first gets DEADLINE_EXCEEDED, a
Status with a long deadline hangs until the resume; the replicas elect a new primary, and the
worker's push in flight is given up once the shard record names the successor (the PS client
re-reads it while a call waits, pschaos.psnodes.client.shard_calls.ShardCalls._call_primary) and retried there. Resumed, the old primary finds its lease bound
passed and steps down, and the new primary brings it back into the ISR.
"""
from __future__ import annotations

import pytest

from pschaos.harness.checkers.acks import exactly_once, no_lost_acks
from pschaos.harness.checkers.primaries import single_primary
from pschaos.harness.backends.sim.network import DEADLINE_EXCEEDED, UNAVAILABLE
from pschaos.psnodes.client.shard_calls import DEPOSED_CHECK_S
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen, SimRpcError, call
from pschaos.psnodes.proto import ps_pb2

PAUSE_T, LATE_T, RESUME_T, PUSH_UNTIL, END = 3.0, 4.0, 7.0, 10.0, 12.0


def run(seed: int) -> tuple[SimShardCluster, dict]:
    cl = SimShardCluster(seed)
    cl.env.process(cl.client().run(until=PUSH_UNTIL))
    old = cl.copies["shard-0/0"]
    out: dict = {}

    def status(key: str, timeout: float) -> Gen:
        deadline = cl.env.now + timeout
        try:
            out[key] = yield from call(cl.net, "harness", old.name, lambda: old.alive,
                                       lambda: old.serve_status(ps_pb2.StatusRequest(), deadline - 0.02), 16,
                                       lambda _r: 64, deadline)
        except SimRpcError as e:
            out[key] = e
        out[key + "_t"] = cl.env.now

    def scenario() -> Gen:
        yield from cl.clock.sleep(PAUSE_T)
        old.pause()
        cl.history.record("pause", {"target": old.name})
        cl.env.process(status("short", 0.3))
        cl.env.process(status("long", 10.0))
        yield from cl.clock.sleep(LATE_T - PAUSE_T)
        cl.env.process(status("late", 10.0))
        yield from cl.clock.sleep(RESUME_T - LATE_T)
        old.resume()
        cl.history.record("resume", {"target": old.name})

    cl.env.process(scenario())
    cl.env.run(until=END)
    cl.final_states()
    return cl, out


@pytest.fixture(scope="module")
def seeded() -> tuple[SimShardCluster, dict]:
    return run(7)


def events(cl: SimShardCluster, f: str, node: str | None = None) -> list[dict]:
    return [e for e in cl.history.events if e["f"] == f and (node is None or e["node"] == node)]


def test_a_replica_takes_over_while_the_primary_is_paused(seeded) -> None:
    cl, _ = seeded
    (promote,) = [e for e in events(cl, "promote") if e["value"]["epoch"] == 2]
    assert promote["node"] in ("shard-0/1", "shard-0/2")
    # the winner's detector suspected after its floor of silence; its probe of the frozen primary
    # went unanswered until the silence reached suspect_s (the fixed detector's timeout), then it stood
    (suspect,) = [e for e in events(cl, "suspect", promote["node"]) if e["value"]["epoch"] == 1]
    assert suspect["value"]["silent_ms"] >= cl.cfg.suspect_s * 1000
    assert PAUSE_T + cl.cfg.suspect_s - cl.cfg.heartbeat_s <= suspect["t"] < promote["t"] < PAUSE_T + cl.cfg.suspect_s + 0.2
    oks = [e for e in events(cl, "push") if e["type"] == "ok"]
    first2 = min(e["t"] for e in oks if e["value"]["epoch"] == 2)
    # the push in flight at the pause is given up at the client's first look at the shard record
    # after the promotion (not at its 2 s deadline), then retries at the new primary
    assert promote["t"] < first2 < promote["t"] + DEPOSED_CHECK_S + 0.05
    assert not [e for e in oks if e["value"]["epoch"] == 1 and e["t"] > PAUSE_T + 0.01]


def test_its_lease_expires_in_etcd_while_it_is_paused(seeded) -> None:
    cl, _ = seeded
    key = cl.cfg.node_key("shard-0/0")
    (gone,) = [c for c in cl.etcd.changes if c.key == key and c.kind == "delete"]
    assert gone.cause == "expire"
    assert PAUSE_T + cl.cfg.lease_ttl_s * 5 / 6 - 0.01 <= gone.t <= PAUSE_T + cl.cfg.lease_ttl_s


def test_calls_to_a_paused_copy_get_no_answer_until_it_resumes(seeded) -> None:
    _, out = seeded
    assert isinstance(out["short"], SimRpcError) and out["short"].status == DEADLINE_EXCEEDED
    assert out["short_t"] == pytest.approx(PAUSE_T + 0.3)
    # no caller of Status watches the shard record: both are answered after the resume, once
    # its elector, woken first, saw the lease bound passed
    for key in ("long", "late"):
        assert (out[key].role, out[key].epoch, out[key].node) == ("replica", 1, "shard-0/0")
        assert RESUME_T <= out[key + "_t"] < RESUME_T + 0.01


def test_resumed_it_steps_down_and_rejoins_the_isr(seeded) -> None:
    cl, _ = seeded
    (down,) = events(cl, "step-down", "shard-0/0")
    (lost,) = events(cl, "lease-lost", "shard-0/0")
    assert down["t"] == lost["t"] and RESUME_T <= down["t"] < RESUME_T + cl.cfg.heartbeat_s + 0.01
    added = [e for e in events(cl, "isr") if e["value"]["added"] == "shard-0/0"]
    assert added and added[0]["value"]["epoch"] == 2 and added[0]["t"] > RESUME_T
    states = [e["value"] for e in events(cl, "final-state")]
    assert all(s["alive"] for s in states) and len({s["checksum"] for s in states}) == 1
    assert [s["node"] for s in states if s["role"] == "primary"] == [events(cl, "promote")[-1]["node"]]


def test_the_harness_checkers_pass_and_a_seed_replays_exactly(seeded) -> None:
    cl, _ = seeded
    for check in (no_lost_acks, single_primary, exactly_once):
        v = check(cl.history.events, {"replication": "sync"})
        assert v.valid is True, (check.__name__, v.details)
    assert run(7)[0].history.events == cl.history.events
