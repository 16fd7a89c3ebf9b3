"""A paused (SIGSTOP) replica under sync replication in the twin: the primary drops it from the
ISR once it answered nothing for suspect_s, while its Replicate call is still in flight, and
acks go on without it; resumed, it catches up and rejoins.

Before the primary looked at the peer during the call, the drop came when the call failed, at
its 2 s deadline, and no push was acknowledged in between (pause-replica's longest wait between
acks: 2.0 s on both backends). One shard, 3 copies, a worker pushing until t=10.
"""
from __future__ import annotations

import pytest

from harness.checkers.acks import exactly_once, no_lost_acks
from harness.sim.pushclient import SimShardCluster
from psnodes.core.isr import DROP_MARGIN_S

PAUSE_T, RESUME_T, PUSH_UNTIL, END = 3.0, 4.5, 10.0, 12.0
PAUSED = "shard-0/2"


@pytest.fixture(scope="module")
def cl() -> SimShardCluster:
    cl = SimShardCluster(7)
    cl.env.process(cl.client().run(until=PUSH_UNTIL))
    rep = cl.copies[PAUSED]

    def scenario():
        yield from cl.clock.sleep(PAUSE_T)
        rep.pause()
        yield from cl.clock.sleep(RESUME_T - PAUSE_T)
        rep.resume()

    cl.env.process(scenario())
    cl.env.run(until=END)
    cl.final_states()
    return cl


def isr_events(cl: SimShardCluster) -> list[dict]:
    return [e for e in cl.history.events if e["f"] == "isr"]


def test_the_primary_drops_it_while_its_call_is_in_flight(cl) -> None:
    (drop,) = [e for e in isr_events(cl) if e["value"]["removed"] == PAUSED]
    assert drop["value"]["reason"] == f"no answer for {cl.cfg.suspect_s}s: a call in flight"
    # its last answer came before the pause; the look is due suspect_s (+ the margin) after it,
    # and the etcd compare-and-swap takes a few milliseconds more: long before the 2 s deadline
    assert PAUSE_T < drop["t"] <= PAUSE_T + cl.cfg.suspect_s + DROP_MARGIN_S + 0.05 < RESUME_T


def test_acks_go_on_while_it_is_paused(cl) -> None:
    (drop,) = [e for e in isr_events(cl) if e["value"]["removed"] == PAUSED]
    oks = [e["t"] for e in cl.history.events if e["f"] == "push" and e["type"] == "ok"]
    assert [t for t in oks if drop["t"] <= t < RESUME_T], "no push acknowledged between the drop and the resume"
    assert not [t for t in oks if PAUSE_T + cl.cfg.heartbeat_s < t < drop["t"]], "a sync ack without the paused replica"


def test_resumed_it_catches_up_and_rejoins(cl) -> None:
    (back,) = [e for e in isr_events(cl) if e["value"]["added"] == PAUSED]
    assert back["t"] > RESUME_T and back["value"]["reason"] == "caught up"
    states = [e["value"] for e in cl.history.events if e["f"] == "final-state"]
    assert all(s["alive"] for s in states) and len({s["checksum"] for s in states}) == 1
    for check in (no_lost_acks, exactly_once):
        v = check(cl.history.events, {"replication": "sync"})
        assert v.valid is True, (check.__name__, v.details)
