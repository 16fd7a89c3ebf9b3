"""The simulated network: exact (time, outcome) sequences per fault kind, and seed determinism."""
from __future__ import annotations

import random
from typing import Any

import pytest
import simpy

from pschaos.harness.backends.sim.network import (DEADLINE_EXCEEDED, SUPPORTED, UNAVAILABLE, Delivery, SimNetwork,
                                 SimNetworkError)
from pschaos.netfaults.faults import LINK_FAULTS

CAL = {"fixed_s": 0.001, "per_byte_s": 1e-6, "rto_s": 0.2, "rto_max_s": 60.0, "refused_s": 0.0005}
W, S = "worker-0", "shard-0/0"
LINK = f"{W}->{S}"


def net(seed: int = 1, **cal: Any) -> tuple[simpy.Environment, SimNetwork]:
    env = simpy.Environment()
    return env, SimNetwork(env, random.Random(seed), {**CAL, **cal})


def send(env: simpy.Environment, n: SimNetwork, nbytes: int, deadline: float | None = None,
         at: float = 0.0, reply: bool = False) -> list[tuple[float, Delivery]]:
    """Send one message at `at`; run to the end; the (time, delivery) of its completion."""
    out: list[tuple[float, Delivery]] = []

    def go():
        yield env.timeout(at - env.now)
        d = yield (n.deliver(S, W, nbytes, deadline, reply=True) if reply else n.deliver(W, S, nbytes, deadline))
        out.append((env.now, d))

    env.process(go())
    env.run()
    return out


def base(nbytes: int) -> float:
    return 0.001 + 1e-6 * nbytes


def test_clean_link_takes_the_calibrated_delay() -> None:
    env, n = net()
    assert send(env, n, 1000) == [(base(1000), Delivery(True, base(1000)))]


def test_latency_adds_exactly_its_ms_without_jitter() -> None:
    env, n = net()
    n.add_fault("latency", [LINK], {"latency_ms": 100})
    assert send(env, n, 1000) == [(base(1000) + 0.1, Delivery(True, base(1000) + 0.1))]


def test_latency_upstream_leaves_replies_alone_unless_both() -> None:
    env, n = net()
    n.add_fault("latency", [LINK], {"latency_ms": 100})
    assert send(env, n, 1000, reply=True)[0][0] == base(1000)
    env, n = net()
    n.add_fault("latency", [(W, S)], {"latency_ms": 100, "stream": "both"})
    assert send(env, n, 1000, reply=True)[0][0] == base(1000) + 0.1


def test_bandwidth_100_kBps_makes_200_kB_take_2_s() -> None:
    env, n = net(fixed_s=0.0, per_byte_s=0.0)
    n.add_fault("bandwidth", [LINK], {"rate_kbps": 100})
    assert send(env, n, 200_000) == [(2.0, Delivery(True, 2.0))]


def test_bandwidth_queues_messages_on_one_link() -> None:
    env, n = net(fixed_s=0.0, per_byte_s=0.0)
    n.add_fault("bandwidth", [LINK], {"rate_kbps": 100})
    a, b = n.deliver(W, S, 100_000), n.deliver(W, S, 100_000)
    env.run()
    assert (a.value.delay, b.value.delay) == (1.0, 2.0)


@pytest.mark.parametrize("kind,params", [("loss", {"percent": 100}), ("partition", {})])
def test_total_loss_and_partition_time_out_at_the_deadline(kind: str, params: dict) -> None:
    env, n = net()
    n.add_fault(kind, [LINK], params)
    assert send(env, n, 1000, deadline=1.5) == [(1.5, Delivery(False, 1.5, DEADLINE_EXCEEDED, kind))]


def test_partition_cuts_replies_too() -> None:
    env, n = net()
    n.add_fault("partition", [LINK], {})
    assert send(env, n, 1000, deadline=1.0, reply=True)[0][1].error == DEADLINE_EXCEEDED


def test_removing_a_fault_restores_delivery() -> None:
    env, n = net()
    h = n.add_fault("partition", [LINK], {})
    n.remove_fault(h)
    assert send(env, n, 1000) == [(base(1000), Delivery(True, base(1000)))]


def test_healed_partition_lets_the_next_retransmission_through() -> None:
    env, n = net()
    h = n.add_fault("partition", [LINK], {})
    env.timeout(0.5).callbacks.append(lambda _e: n.remove_fault(h))      # heal at 0.5
    # retransmissions at 0.2 (still cut), 0.2 + 0.4 (through), then the clean link's delay
    t = 0.2 + 0.4 + 0.001 + 1e-6 * 1000
    assert send(env, n, 1000, deadline=5.0) == [(t, Delivery(True, t))]


def test_keepalive_turns_a_stall_into_unavailable() -> None:
    env, n = net(keepalive_s=1.5)
    n.add_fault("partition", [LINK], {})
    assert send(env, n, 1000, deadline=5.0) == [(1.5, Delivery(False, 1.5, UNAVAILABLE, "partition"))]


def test_link_down_is_refused_fast() -> None:
    env, n = net()
    n.add_fault("link-down", [LINK], {})
    assert send(env, n, 1000, deadline=5.0) == [(0.0005, Delivery(False, 0.0005, UNAVAILABLE, "link-down"))]


def test_timeout_closes_after_its_ms_or_stalls_to_the_deadline() -> None:
    env, n = net()
    n.add_fault("timeout", [LINK], {"timeout_ms": 300})
    assert send(env, n, 1000, deadline=5.0) == [(0.3, Delivery(False, 0.3, UNAVAILABLE, "timeout"))]
    env, n = net()
    n.add_fault("timeout", [LINK], {})
    assert send(env, n, 1000, deadline=2.0) == [(2.0, Delivery(False, 2.0, DEADLINE_EXCEEDED, "timeout"))]


def test_reset_peer_resets_after_its_ms() -> None:
    env, n = net()
    n.add_fault("reset_peer", [LINK], {"timeout_ms": 250})
    assert send(env, n, 1000, deadline=5.0) == [(0.25, Delivery(False, 0.25, UNAVAILABLE, "reset_peer"))]
    env, n = net()
    n.add_fault("reset_peer", [LINK], {"timeout_ms": 250})
    assert send(env, n, 1000, deadline=0.1) == [(0.1, Delivery(False, 0.1, DEADLINE_EXCEEDED, "reset_peer"))]


def test_limit_data_closes_the_connection_past_its_bytes() -> None:
    env, n = net()
    n.add_fault("limit_data", [LINK], {"bytes": 2500})
    ds = [n.deliver(W, S, 1000) for _ in range(4)]
    env.run()
    assert [(d.value.ok, d.value.error) for d in ds] == [(True, None), (True, None), (False, UNAVAILABLE), (True, None)]


def test_slicer_adds_its_delay_per_slice() -> None:
    env, n = net()
    n.add_fault("slicer", [LINK], {"average_size": 100, "delay_us": 1000})
    assert send(env, n, 1000)[0][0] == base(1000) + 10 * 1000 / 1e6


def test_late_arrival_is_deadline_exceeded_at_the_deadline() -> None:
    env, n = net()
    n.add_fault("latency", [LINK], {"latency_ms": 100})
    assert send(env, n, 1000, deadline=0.05) == [(0.05, Delivery(False, 0.05, DEADLINE_EXCEEDED, None))]


def test_unknown_and_unmodelled_kinds_are_refused_by_name() -> None:
    env, n = net()
    with pytest.raises(SimNetworkError, match="'blackhole'.*supports: latency"):
        n.add_fault("blackhole", [LINK], {})
    with pytest.raises(SimNetworkError, match="'kill' is not a network fault"):
        n.add_fault("kill", [LINK], {})


def test_params_are_checked_by_the_real_fault_classes() -> None:
    env, n = net()
    with pytest.raises(SimNetworkError, match="params.latency_ms is required"):
        n.add_fault("latency", [LINK], {})
    with pytest.raises(SimNetworkError, match="unknown params rate"):
        n.add_fault("bandwidth", [LINK], {"rate": 5})
    with pytest.raises(SimNetworkError, match=r"percent=0.0 must be within"):
        n.add_fault("loss", [LINK], {"percent": 0})
    with pytest.raises(SimNetworkError, match="no active fault with handle 9"):
        n.remove_fault(9)


def test_every_netfaults_kind_is_modelled() -> None:
    assert set(SUPPORTED) == set(LINK_FAULTS)


def trace(seed: int) -> list[tuple[float, int, bool, str | None]]:
    """1,000 messages, one every 10 ms, on a link with 10% loss and 20 +/- 15 ms latency."""
    env, n = net(seed)
    n.add_fault("loss", [LINK], {"percent": 10.0})
    n.add_fault("latency", [LINK], {"latency_ms": 20, "jitter_ms": 15})
    out: list[tuple[float, int, bool, str | None]] = []

    def one(i: int):
        yield env.timeout(i * 0.01)
        d = yield n.deliver(W, S, 1000, deadline=env.now + 0.5)
        out.append((env.now, i, d.ok, d.error))

    for i in range(1000):
        env.process(one(i))
    env.run()
    return out


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    a = trace(7)
    assert len(a) == 1000 and a == trace(7)
    assert a != trace(8)
    lost_once = sum(1 for t, i, ok, _ in a if ok and t - i * 0.01 > 0.2)
    assert 50 < lost_once < 150                         # ~10% needed a retransmission


def test_toxicity_is_drawn_once_per_link_and_stream() -> None:
    env, n = net()
    n.add_fault("latency", [LINK], {"latency_ms": 100, "toxicity": 0.0})
    assert send(env, n, 1000) == [(base(1000), Delivery(True, base(1000)))]


def test_links_must_be_named_a_to_b() -> None:
    env, n = net()
    with pytest.raises(SimNetworkError, match="must be 'A->B'"):
        n.add_fault("partition", ["worker-0"], {})


def test_without_deadline_tcp_gives_up_after_its_retransmissions() -> None:
    env, n = net(rto_max_s=1.0, retries_max=3)
    n.add_fault("partition", [LINK], {})
    t = 0.2 + 0.4 + 0.8 + 1.0          # the 3rd retransmission, at 1.4 s, is lost too: given up at 2.4 s
    assert send(env, n, 1000) == [(t, Delivery(False, t, UNAVAILABLE, "partition"))]
