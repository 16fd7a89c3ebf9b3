"""Where the twin charges CPU (harness/backends/sim/cpu.py): an etcd operation's client and server CPU
within its answer time, a copy's per request served, a caller's per call; each slows down when
the host's cores are shared, by exactly the processor-sharing rate."""
from __future__ import annotations

import random

import pytest
import simpy

from pschaos.harness.backends.sim.cpu import SimCPU
from pschaos.harness.backends.sim.etcd import SimEtcd
from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import call, etcd_call
from pschaos.psnodes.config import ClusterConfig

NET = {"fixed_s": 0.001, "per_byte_s": 0.0}


def etcd_read_time(background: float, read_s: float = 0.010) -> float:
    env = simpy.Environment()
    cpu = SimCPU(env, 1, background)
    net = SimNetwork(env, random.Random(0), NET)
    etcd = SimEtcd(env, read_s=read_s, write_s=0.020, cpu=cpu, cpu_s=0.002, client_cpu_s=0.003)
    took = []

    def proc():
        yield from etcd_call(net, env, "n", lambda: etcd.get("/k"), timeout=1.0, server=etcd)
        took.append(env.now)
    env.process(proc())
    env.run()
    return took[0]


def test_an_etcd_read_charges_client_and_server_cpu_within_its_answer_time() -> None:
    # idle host: wire 2 ms + the read's 10 ms, of which 5 ms are CPU (3 client, 2 server)
    assert etcd_read_time(0.0) == pytest.approx(0.012, abs=1e-12)
    # one other job on the one core: the 5 ms of CPU take 10 ms, the 5 ms of wait stay
    assert etcd_read_time(1.0) == pytest.approx(0.017, abs=1e-12)
    # more CPU than answer time (threads side by side): scaled to fit it, 2 ms of CPU in a 2 ms read
    assert etcd_read_time(0.0, read_s=0.002) == pytest.approx(0.004, abs=1e-12)
    assert etcd_read_time(1.0, read_s=0.002) == pytest.approx(0.006, abs=1e-12)


def test_a_callers_cpu_per_call_is_charged_before_the_request_leaves() -> None:
    env = simpy.Environment()
    cpu = SimCPU(env, 1, 1.0)               # half a core for us
    net = SimNetwork(env, random.Random(0), NET)
    took = []

    def handler():
        return "ok"
        yield  # noqa: unreachable - a handler is a generator

    def proc():
        out = yield from call(net, "a", "b", lambda: True, handler, 10, lambda _r: 10, 1.0, cpu, 0.004)
        took.append((out, env.now))
    env.process(proc())
    env.run()
    assert took == [("ok", pytest.approx(0.010, abs=1e-12))]      # 4 ms of CPU at half speed + 2 ms of wire


def push_times(pushers: int, cores: float, copies: int = 1, **costs: float) -> list[float]:
    """Each push's invoke-to-ok time on a shard of `copies` sync copies whose CPU costs are
    `costs` (SimCopy attributes: request_s, replicate_s, send_s), with `pushers` clients pushing
    at the same instant."""
    cfg = ClusterConfig(cluster_id="sim", etcd="sim://etcd", shards=1, copies=copies, workers=pushers, mode="sync",
                        seed=1, min_isr=1)
    cl = SimShardCluster(1, cfg)
    cl.attach_cpu(cores)
    for c in cl.copies.values():
        c.apply_s_per_mb, c.replicate_s_per_mb = 0.0, 0.0
        for k, v in costs.items():
            setattr(c, k, v)
    cl.env.run(until=2.0)                   # an elected primary
    clients = [cl.client(f"worker-{j}") for j in range(pushers)]

    for client in clients:
        cl.env.process(client.init())
    cl.env.run(until=3.0)                   # inits done: the pushes start at one instant
    for client in clients:
        cl.env.process(client.push(0))
    cl.env.run(until=4.0)
    by_op = {}
    for e in cl.history.events:
        if e["f"] == "push" and e.get("op_id"):
            by_op.setdefault(e["op_id"], {})[e["type"]] = e["t"]
    took = [v["ok"] - v["invoke"] for v in by_op.values() if "ok" in v]
    assert len(took) == pushers
    return took


def push_latency(pushers: int, cores: float) -> float:
    """The slowest push when a 1-copy shard's handler spends 10 ms of CPU a request."""
    return max(push_times(pushers, cores, request_s=0.010))


def test_a_copys_cpu_per_request_waits_for_the_others_it_serves_at_once() -> None:
    alone = push_latency(1, 1)
    assert alone >= 0.010                   # the handler's 10 ms of CPU at least
    assert push_latency(2, 1) - alone == pytest.approx(0.010, abs=1e-6)   # two at once on one core: 10 ms more
    # two cores do not help: one process's handlers take turns under its GIL
    assert push_latency(2, 2) - alone == pytest.approx(0.010, abs=1e-6)


def sync_push_latency(request_s: float, replicate_s: float, send_s: float) -> float:
    """One push's invoke-to-ok time on a 2-copy sync shard, four cores (no contention): the
    primary's handler CPU, then its sender's CPU for the Replicate, then the replica's."""
    (took,) = push_times(1, 4, copies=2, request_s=request_s, replicate_s=replicate_s, send_s=send_s)
    return took


def test_a_replicate_charges_its_own_calibrated_cpu_not_a_pushs() -> None:
    bare = sync_push_latency(0.0, 0.0, 0.0)
    # the push's 10 ms on the primary; the Replicate costs nothing: no push CPU on either end of it
    assert sync_push_latency(0.010, 0.0, 0.0) - bare == pytest.approx(0.010, abs=1e-9)
    # the sender's 2 ms and the replica's 3 ms, one after the other on the push's path
    assert sync_push_latency(0.010, 0.003, 0.002) - bare == pytest.approx(0.015, abs=1e-9)


def test_a_copys_cpu_beyond_the_calls_is_charged_per_applied_push_and_per_replicate_with_entries() -> None:
    """calibration push_cpu_extra_s and replicate_cpu_extra_s: a primary's CPU per push it applies
    (after the apply, on its GIL line: its sender's Replicate queues behind it) and a replica's
    per Replicate carrying entries, on the push's path of a sync shard, each on its own copy."""
    bare = sync_push_latency(0.0, 0.0, 0.001)
    assert max(push_times(1, 4, copies=2, send_s=0.001, push_extra_s=0.004)) - bare == pytest.approx(0.004, abs=1e-9)
    bare = sync_push_latency(0.0, 0.0, 0.0)
    assert max(push_times(1, 4, copies=2, replicate_extra_s=0.003)) - bare == pytest.approx(0.003, abs=1e-9)
    # a 3-copy shard: each replica's extra runs on its own process, side by side
    bare3 = max(push_times(1, 4, copies=3))
    assert max(push_times(1, 4, copies=3, replicate_extra_s=0.003)) - bare3 == pytest.approx(0.003, abs=1e-9)


def test_a_call_held_at_a_paused_copy_outlives_its_killed_callers_watch_and_lands_once_resumed() -> None:
    """The copy reads etcd for a held call's watch in its caller's name (the client's CPU): when
    the caller dies (workers.py kill: cpu.abort_owner), the watch stops and the call stays at the
    copy, as a real server keeps a dead client's request until it answers; before, the abort's
    Killed unwound the copy's handler and a push the real server applies after SIGCONT was lost."""
    from pschaos.harness.backends.sim.transport import Killed

    cfg = ClusterConfig(cluster_id="sim", etcd="sim://etcd", shards=1, copies=1, workers=1, mode="sync", seed=1,
                        min_isr=1)
    cl = SimShardCluster(1, cfg)
    cpu = cl.attach_cpu(4)
    cl.etcd.cpu, cl.etcd.read_s, cl.etcd.client_cpu_s = cpu, 0.05, 0.05     # a watch read: 50 ms of the caller's CPU
    cl.env.run(until=2.0)
    client = cl.client("worker-0")
    cl.env.process(client.init())
    cl.env.run(until=3.0)
    primary = cl.primary()
    before = primary.store.seq
    primary.pause()
    cl.env.process(client.push(0))
    aborted = []

    def kill_during_a_watch_read():
        while "worker-0" not in cpu._lines:
            yield cl.env.timeout(0.001)
        cpu.abort_owner("worker-0", Killed("worker-0"))
        aborted.append(cl.env.now)
    cl.env.process(kill_during_a_watch_read())
    cl.env.run(until=3.6)
    assert aborted                                  # the watch was reading when its caller died
    primary.resume()
    cl.env.run(until=4.5)
    assert primary.store.seq == before + 1          # the held push landed after SIGCONT
