"""A slow but live replica stays in the ISR in the twin. With 20% packet loss on the primary's
links to its replicas, a Replicate call whose message is lost waits for TCP's retransmission and
runs past suspect_s of silence; the primary's look then probes the peer on its three paths, one
answers within probe_wait, and the peer is held ("isr-held"), never dropped by a look. With
150 ms of latency each way every call's round trip alone passes suspect_s: the probe waits twice
the last call's time, so it answers in time too (with a wait of suspect_s it never would).

Dropping on the call's silence alone (tried first) dropped and re-added a live replica on a lossy
link 51 times over 10 seeds of loss-20-primary-replica. One shard, 3 copies, sync mode, a worker
pushing until t=8.
"""
from __future__ import annotations

import pytest

from pschaos.harness.checkers.acks import exactly_once, no_lost_acks
from pschaos.harness.backends.sim.pushclient import SimShardCluster

LINKS = ["shard-0/0->shard-0/1", "shard-0/0->shard-0/2"]


def run(kind: str, params: dict, push_until: float) -> SimShardCluster:
    """Seed 3 with `kind` on the primary's links to its replicas, a worker pushing until `push_until`."""
    cl = SimShardCluster(3)
    cl.net.add_fault(kind, LINKS, params)
    cl.env.process(cl.client().run(until=push_until))
    cl.env.run(until=push_until + 2.0)
    cl.final_states()
    return cl


@pytest.fixture(scope="module")
def cl() -> SimShardCluster:
    return run("loss", {"percent": 20}, 8.0)


def test_a_slow_replica_is_looked_at_and_held_never_dropped(cl) -> None:
    held = [e for e in cl.history.events if e["f"] == "isr-held"]
    assert held, "no call ran past suspect_s: the look was never tested"
    assert all(e["value"]["silent_ms"] > cl.cfg.suspect_s * 1000 for e in held)
    assert {e["value"]["peer"] for e in held} <= {"shard-0/1", "shard-0/2"}
    # a call that failed outright (its retransmissions lost to its 2 s deadline) still drops the
    # peer, as before; a look never did, since a path always answered
    looked = [e for e in cl.history.events if e["f"] == "isr" and e["value"]["removed"]
              and e["value"]["reason"].endswith("to a probe")]
    assert not looked, looked


def test_acks_and_copies_are_sound(cl) -> None:
    states = [e["value"] for e in cl.history.events if e["f"] == "final-state"]
    assert len({s["checksum"] for s in states}) == 1
    for check in (no_lost_acks, exactly_once):
        v = check(cl.history.events, {"replication": "sync"})
        assert v.valid is True, (check.__name__, v.details)


@pytest.fixture(scope="module")
def far() -> SimShardCluster:
    return run("latency", {"latency_ms": 150, "stream": "both"}, 6.0)


def test_a_far_replica_is_held_at_every_call_never_dropped(far) -> None:
    held = [e for e in far.history.events if e["f"] == "isr-held"]
    assert len(held) > 5, "the round trip did not pass suspect_s: the look was not tested"
    assert not [e for e in far.history.events if e["f"] == "isr" and e["value"]["removed"]]
    states = [e["value"] for e in far.history.events if e["f"] == "final-state"]
    assert len({s["checksum"] for s in states}) == 1
