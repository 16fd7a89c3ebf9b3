"""A paused (SIGSTOP) replica under sync replication in the twin: its primary's Replicate call
to it stays open, so past suspect_s of silence the primary looks (a probe on the replica's
paths), gets no answer and drops it from the ISR while the call is still in flight; acks go on
without it, and once resumed it catches up and rejoins.

Before the look, the drop came when the call failed at its 2 s deadline, and no push was
acknowledged in between (pause-replica: 2.0 s without an ack on both backends). One shard,
3 copies, a worker pushing until t=10; the pause (1.5 s) ends before that deadline would.
"""
from __future__ import annotations

import pytest

from pschaos.harness.checkers.acks import exactly_once, no_lost_acks
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.psnodes.core.isr import DROP_MARGIN_S, probe_wait

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


def events(cl: SimShardCluster, f: str) -> list[dict]:
    return [e for e in cl.history.events if e["f"] == f]


def test_the_primary_drops_it_while_its_call_is_in_flight(cl) -> None:
    (drop,) = [e for e in events(cl, "isr") if e["value"]["removed"] == PAUSED]
    assert drop["value"]["reason"] == f"no answer for {cl.cfg.suspect_s}s: no answer to the call in flight or to a probe"
    # its last answer came before the pause: the look is due suspect_s (+ the margin) after it,
    # the probe waits probe_wait for an answer, the etcd compare-and-swap a few milliseconds more
    latest = PAUSE_T + cl.cfg.suspect_s + DROP_MARGIN_S + probe_wait(cl.cfg.probe_s, cl.cfg.suspect_s) + 0.05
    assert PAUSE_T + cl.cfg.suspect_s < drop["t"] <= latest < RESUME_T
    assert not events(cl, "isr-held")           # a frozen replica never answers a probe


def test_acks_go_on_while_it_is_paused(cl) -> None:
    (drop,) = [e for e in events(cl, "isr") if e["value"]["removed"] == PAUSED]
    oks = [e["t"] for e in events(cl, "push") if e["type"] == "ok"]
    assert [t for t in oks if drop["t"] <= t < RESUME_T], "no push acknowledged between the drop and the resume"
    assert not [t for t in oks if PAUSE_T + cl.cfg.heartbeat_s < t < drop["t"]], "a sync ack without the paused replica"


def test_resumed_it_catches_up_and_rejoins(cl) -> None:
    (back,) = [e for e in events(cl, "isr") if e["value"]["added"] == PAUSED]
    assert back["t"] > RESUME_T and back["value"]["reason"] == "caught up"
    states = [e["value"] for e in events(cl, "final-state")]
    assert all(s["alive"] for s in states) and len({s["checksum"] for s in states}) == 1
    for check in (no_lost_acks, exactly_once):
        v = check(cl.history.events, {"replication": "sync"})
        assert v.valid is True, (check.__name__, v.details)
