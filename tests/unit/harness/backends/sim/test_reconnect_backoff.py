"""gRPC's reconnect backoff in the twin (harness/backends/sim/reconnect.py): a lost connection
leaves a channel idle, a refused attempt starts timed attempts (100 ms first: gRPC core's floor
under psnodes' 20 ms, then 1.6x up to 200 ms, within +-20%) during which calls fail at once, and
the first attempt that finds the peer reachable connects; and a primary's sender in the twin
reaches a replica back from a long stop only at such an attempt, not at its next heartbeat."""
from __future__ import annotations

import random

import simpy

from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.reconnect import JITTER, MULTIPLIER, ReconnectBackoff, pauses
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.wire.channels import channel_options


def test_grpc_core_raises_psnodes_bounds_to_its_100_ms_floor() -> None:
    opts = dict(channel_options(0))
    assert opts["grpc.initial_reconnect_backoff_ms"] < 100          # psnodes asks for less ...
    first, top = pauses()
    assert first == max(0.1, opts["grpc.initial_reconnect_backoff_ms"] / 1e3) == 0.1     # ... and gets 100 ms
    assert top == max(0.1, opts["grpc.max_reconnect_backoff_ms"] / 1e3)


def _channel(seed: int = 3) -> tuple[simpy.Environment, ReconnectBackoff, dict]:
    env = simpy.Environment()
    state = {"up": False, "tried": []}

    def reachable() -> bool:
        state["tried"].append(env.now)
        return state["up"]
    return env, ReconnectBackoff(env, random.Random(seed), reachable), state


def test_a_lost_connection_goes_idle_and_only_a_refused_attempt_starts_the_backoff() -> None:
    env, ch, _ = _channel()
    assert ch.usable()
    ch.failed(refused=False)                  # a deadline on a live connection: nothing changes
    assert ch.usable()
    ch.ok()
    ch.failed(refused=True)                   # the peer died under a connected channel: idle, no backoff
    assert ch.usable() and not ch.ready
    ch.failed(refused=True)                   # the next call's connection attempt was refused
    assert not ch.usable()


def test_the_attempts_pause_100_160_200_ms_within_the_jitter_until_the_peer_is_back() -> None:
    env, ch, state = _channel()
    ch.failed(refused=True)
    env.run(until=3.0)
    times = [0.0] + state["tried"]
    gaps = [b - a for a, b in zip(times, times[1:])]
    first, top = pauses()
    want = first
    for g in gaps:
        assert want * (1 - JITTER) - 1e-9 <= g <= want * (1 + JITTER) + 1e-9, (gaps, want)
        want = min(want * MULTIPLIER, top)
    assert not ch.usable() and len(gaps) > 10
    back = env.now
    state["up"] = True
    env.run(until=back + top * (1 + JITTER) + 1e-6)
    assert ch.usable() and ch.ready                    # the first attempt after it came back
    assert back < state["tried"][-1] <= back + top * (1 + JITTER) + 1e-6


def test_a_closed_channel_stops_its_attempts() -> None:
    env, ch, state = _channel()
    ch.failed(refused=True)
    env.run(until=0.5)
    n = len(state["tried"])
    ch.close()
    env.run(until=3.0)
    assert len(state["tried"]) == n and ch.usable()


def test_the_network_says_which_links_refuse_or_drop_a_connection_attempt() -> None:
    net = SimNetwork(simpy.Environment(), random.Random(1))
    assert not net.refuses("a", "b") and not net.blocks("a", "b")
    down = net.add_fault("link-down", [("a", "b")])
    assert net.refuses("a", "b") and net.blocks("a", "b") and not net.blocks("a", "c")
    net.remove_fault(down)
    net.add_fault("partition", [("a", "b")])
    assert net.blocks("a", "b") and not net.refuses("a", "b")


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
    much (and a catch-up's few ms) after the restart, not within a heartbeat (50 ms) as a
    channel without backoff brought it. Over seeds the gaps spread across the pause, as the
    real ones did (103-207 ms)."""
    gaps = [_restart_gap(seed, 1.5) for seed in range(1, 9)]
    assert max(gaps) > 0.1 and min(gaps) < max(gaps) - 0.05, gaps
    assert all(g < 0.3 for g in gaps), gaps
