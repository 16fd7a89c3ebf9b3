"""The twin's shard: pschaos.psnodes.core's decisions on the real ShardStore, in virtual time.

One shard, 3 copies, sync mode; a client pushes for 10 virtual seconds and the primary is killed
at t=5. A new primary at a higher epoch must ack within 1 s, every acked push must be on every
live copy, the harness's own checkers must pass, and a seed must replay the run exactly.
"""
from __future__ import annotations

import pytest

from pschaos.harness.checkers.acks import exactly_once, no_lost_acks
from pschaos.harness.checkers.primaries import single_primary
from pschaos.harness.backends.sim.pushclient import SimShardCluster

KILL_T, PUSH_UNTIL, END = 5.0, 10.0, 13.0


def run(seed: int) -> tuple[SimShardCluster, list[dict], list[dict]]:
    cl = SimShardCluster(seed)
    first = cl.client()
    cl.env.process(first.run(until=PUSH_UNTIL))
    cl.kill_at("shard-0/0", KILL_T)
    cl.env.run(until=END)
    states = cl.final_states()
    return cl, cl.history.events, states


@pytest.fixture(scope="module")
def seeded() -> tuple[SimShardCluster, list[dict], list[dict]]:
    return run(7)


def oks(events: list[dict]) -> list[dict]:
    return [e for e in events if e["f"] == "push" and e["type"] == "ok"]


def test_a_new_primary_at_a_higher_epoch_acks_within_one_virtual_second(seeded) -> None:
    _, events, _ = seeded
    before = [e for e in oks(events) if e["t"] <= KILL_T]
    after = [e for e in oks(events) if e["value"]["epoch"] > 1]
    assert before and {e["value"]["epoch"] for e in before} == {1}
    assert after, "no ack at a higher epoch after the kill"
    first = min(e["t"] for e in after)
    assert KILL_T < first <= KILL_T + 1.0, first
    assert {e["value"]["node"] for e in after} <= {"shard-0/1", "shard-0/2"}
    assert max(e["t"] for e in oks(events)) > PUSH_UNTIL - 0.5      # pushes went on to the end


def test_every_acked_push_is_on_every_live_copy(seeded) -> None:
    cl, events, states = seeded
    live = [s for s in states if s["alive"]]
    assert [s["node"] for s in states if not s["alive"]] == ["shard-0/0"]
    assert len(live) == 2 and len({s["checksum"] for s in live}) == 1 and len({s["seq"] for s in live}) == 1
    acked = {e["value"]["req_id"] for e in oks(events)}
    for s in live:
        (ranges,) = s["applied"].values()
        assert all(any(lo <= r <= hi for lo, hi in ranges) for r in acked)
        assert s["audit"] == {"worker-0": s["pushes"]} and s["pushes"] >= len(acked)


def test_the_harness_checkers_pass(seeded) -> None:
    _, events, _ = seeded
    ctx = {"replication": "sync"}
    for check in (no_lost_acks, single_primary, exactly_once):
        v = check(events, ctx)
        assert v.valid is True, (check.__name__, v.details)


def test_same_seed_same_events_and_another_seed_differs(seeded) -> None:
    _, events, _ = seeded
    assert run(7)[1] == events
    assert run(8)[1] != events


def test_a_push_in_flight_at_the_kill_is_retried_with_its_key_and_applied_once() -> None:
    """Kill the primary after it applied a push but before its replicas all acknowledged it: the
    client retries the same key on the new primary, and the push lands exactly once."""
    cl = SimShardCluster(3)
    cl.env.process(cl.client().run(until=PUSH_UNTIL))
    old = cl.copies["shard-0/0"]

    def kill_mid_push():
        yield from cl.clock.sleep(KILL_T)
        yield from cl.clock.wait_until(lambda: old.store.seq > min(old.peer_seq.get(p, 0) for p in old.isr),
                                       timeout=1.0, period=0.0001)
        old.kill()
        cl.history.record("kill", {"target": old.name, "seq": old.store.seq})

    cl.env.process(kill_mid_push())
    cl.env.run(until=END)
    cl.final_states()
    events = cl.history.events
    (kill,) = [e for e in events if e["f"] == "kill"]
    in_flight = [e for e in oks(events) if e["value"]["req_id"] == kill["value"]["seq"] - 1]
    assert len(in_flight) == 1 and in_flight[0]["t"] > kill["t"] and in_flight[0]["value"]["epoch"] == 2
    for check in (no_lost_acks, single_primary, exactly_once):
        v = check(events, {"replication": "sync"})
        assert v.valid is True, (check.__name__, v.details)
