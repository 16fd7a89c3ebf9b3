"""gRPC's reconnect backoff in the twin (harness/backends/sim/reconnect.py): after a refusal a
channel reaches its peer only at an attempt made once the peer serves, its pauses growing 1.6x
from psnodes' initial to its maximum within +-20%; and a primary's sender in the twin reaches a
replica it could not reach for a while at such an attempt, not at its next heartbeat."""
from __future__ import annotations

import random

from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.reconnect import JITTER, MULTIPLIER, ReconnectBackoff
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.wire.channels import channel_options


def _attempts(b: ReconnectBackoff, until: float) -> list[float]:
    """The attempts the channel makes while its peer never serves."""
    out = []
    while b.next_at is not None and b.next_at <= until:
        out.append(b.next_at)
        assert not b.connected(b.next_at, lambda: None)
    return out


def test_a_channel_never_refused_is_connected() -> None:
    b = ReconnectBackoff(random.Random(1))
    assert b.connected(0.0, lambda: None) and b.connected(5.0, lambda: 1.0)


def test_the_pauses_grow_from_psnodes_initial_to_its_maximum_within_the_jitter() -> None:
    opts = dict(channel_options(0))
    first, top = opts["grpc.initial_reconnect_backoff_ms"] / 1e3, opts["grpc.max_reconnect_backoff_ms"] / 1e3
    b = ReconnectBackoff(random.Random(3))
    b.refused(1.0)
    times = [1.0] + _attempts(b, 4.0)
    pauses = [y - x for x, y in zip(times, times[1:])]
    want = first
    for p in pauses:
        assert want * (1 - JITTER) - 1e-9 <= p <= want * (1 + JITTER) + 1e-9, (pauses, want)
        want = min(want * MULTIPLIER, top)
    assert max(pauses) > top * 0.9 and len(pauses) > 10          # it reached the cap and stayed there


def test_a_peer_back_is_reached_at_the_first_attempt_after_it_serves_and_not_before() -> None:
    b = ReconnectBackoff(random.Random(5))
    b.refused(0.0)
    probe = ReconnectBackoff(random.Random(5))                  # the same draws: where the attempts fall
    probe.refused(0.0)
    times = _attempts(probe, 3.0)
    back = 2.0
    after = next(t for t in times if t >= back)
    assert not b.connected(back, lambda: back)                  # it serves, the channel waits
    assert not b.connected(after - 1e-6, lambda: back)
    assert b.connected(after, lambda: back)
    assert b.connected(after + 0.5, lambda: back)               # connected: no backoff any more
    b.refused(after + 0.6)                                      # down again: the pause starts over
    assert b.next_at is not None and b.next_at - (after + 0.6) <= times[0] * (1 + JITTER) / (1 - JITTER)


def test_a_refusal_while_waiting_does_not_restart_the_schedule() -> None:
    b = ReconnectBackoff(random.Random(2))
    b.refused(0.0)
    due = b.next_at
    b.refused(0.005)
    assert b.next_at == due


def _restart_gap(seed: int, down_s: float) -> float:
    """A replica stopped for `down_s`, then started: from its start until its primary's sync."""
    cfg = ClusterConfig(cluster_id="sim", etcd="sim://etcd", shards=1, copies=3, workers=1, mode="sync",
                        seed=seed, log_entries=16)
    cl = SimShardCluster(seed, cfg)
    cl.env.process(cl.client().run(until=3.0 + down_s + 1.0))
    out: dict = {}

    def scenario() -> Gen:
        c2 = cl.copies["shard-0/2"]
        yield from cl.clock.sleep(2.0)
        yield c2.stop()
        yield from cl.clock.sleep(down_s)
        c2.restart()
        out["restart"] = cl.env.now

    cl.env.process(scenario())
    cl.env.run(until=3.0 + down_s + 1.5)
    syncs = [e for e in cl.history.events if e["f"] == "sync" and e["value"]["dst"] == "shard-0/2"
             and e["t"] >= out["restart"]]
    assert syncs, "the restarted replica was never caught up"
    return syncs[0]["t"] - out["restart"]


def test_a_primary_reaches_a_replica_back_from_a_long_stop_only_at_its_channels_next_attempt() -> None:
    """Down 1.5 s, the sender's channel attempts every 160-240 ms: the catch-up comes up to that
    much after the restart, not within a heartbeat (50 ms) as a channel without backoff would
    bring it. Over seeds the gaps spread across the pause, as the real ones did (103-207 ms)."""
    gaps = [_restart_gap(seed, 1.5) for seed in range(1, 9)]
    assert max(gaps) > 0.1 and min(gaps) < max(gaps) - 0.05, gaps
    assert all(g < 0.3 for g in gaps), gaps
