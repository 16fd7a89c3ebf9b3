"""Two timings a failover's path takes that the twin lacked (issue 30, sim validate of
2026-12-07: failover p50 6-7% low on all three kill scenarios), each measured on the real parts:
a killed copy's sockets close only once the kernel has torn its process down (a call in flight
fails ~31 ms after the kill, not at it), and etcd answers later after an idle pause (a read
0.9 ms back to back, 2.9 ms 25 ms after the last one)."""
from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest
import simpy

from pschaos.harness.backends.sim.calibration import Calibration
from pschaos.harness.backends.sim.etcd import SimEtcd
from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.rpc import SimRpcError, call, etcd_call, refused
from pschaos.harness.errors import HarnessError

NET = {"fixed_s": 0.001, "per_byte_s": 0.0, "rto_s": 0.2, "rto_max_s": 60.0, "refused_s": 0.0005}


def _outcome(env: simpy.Environment, gen, out: list) -> None:
    def proc():
        t0 = env.now
        try:
            yield from gen
            out.append((round(env.now - t0, 6), "ok"))
        except SimRpcError as e:
            out.append((round(env.now - t0, 6), e.status))
    env.process(proc())


def test_a_call_in_flight_to_a_killed_copy_fails_when_its_sockets_close_not_at_the_kill():
    from pschaos.psnodes.errors import PSError

    env = simpy.Environment()
    net = SimNetwork(env, random.Random(0), NET)
    callee = SimpleNamespace(alive=True, closed_at=0.0)
    killed = env.event()

    def handler():
        yield killed                  # a push waiting on its replicas: the copy's death ends the wait
        raise PSError("UNAVAILABLE", "the node stopped")
    out: list = []
    _outcome(env, call(net, "worker-0", "shard-0/0", lambda: callee.alive, handler, 10, lambda _r: 10, 5.0,
                       closed_at=lambda: callee.closed_at), out)
    env.run(until=0.1)
    callee.alive, callee.closed_at = False, env.now + 0.031       # SIGKILL at 0.1 s; sockets close at 0.131
    killed.succeed()
    env.run()
    assert out == [(0.131, "UNAVAILABLE")]        # not at the kill: when the kernel closed the sockets
    env = simpy.Environment()
    net = SimNetwork(env, random.Random(0), NET)
    callee = SimpleNamespace(alive=False, closed_at=0.031)         # killed at 0: a new call meanwhile hangs
    out.clear()
    _outcome(env, call(net, "worker-0", "shard-0/0", lambda: callee.alive, handler, 10, lambda _r: 10, 5.0,
                       closed_at=lambda: callee.closed_at), out)
    env.run()
    assert out == [(0.031, "UNAVAILABLE")]        # sent at 0, delivered at 0.001, refused when they close


def test_refused_waits_for_the_sockets_but_never_past_the_callers_deadline():
    env = simpy.Environment()
    net = SimpleNamespace(env=env)
    out: list = []
    _outcome(env, refused(net, lambda: 0.031, 5.0, "down"), out)
    _outcome(env, refused(net, lambda: 0.031, 0.010, "down"), out)
    _outcome(env, refused(net, None, 5.0, "down"), out)            # no teardown known: at once
    env.run()
    assert sorted(out) == [(0.0, "UNAVAILABLE"), (0.01, "DEADLINE_EXCEEDED"), (0.031, "UNAVAILABLE")]


def test_a_killed_copys_sockets_close_its_teardown_after_the_kill():
    from pschaos.harness.backends.sim.copy.process import ProcessControl

    env = simpy.Environment()
    c = SimpleNamespace(alive=True, closed_at=0.0, teardown_s=0.031, env=env)
    p = ProcessControl.__new__(ProcessControl)
    p.c = c
    p.exit = lambda: setattr(c, "alive", False)
    env.run(until=2.0)
    p.kill()
    assert c.closed_at == pytest.approx(2.031)
    env.run(until=2.02)
    p.kill()                                      # a dead copy: nothing moves
    assert c.closed_at == pytest.approx(2.031)


def test_etcd_answers_later_after_an_idle_pause_by_the_calibrated_points():
    from pschaos.harness.backends.sim.calibration import wake_after

    pts = [(0.001, 0.0001), (0.025, 0.002), (0.1, 0.0022)]
    assert wake_after([], 10.0) == 0.0                              # no points (an older file): none
    assert wake_after(pts, 0.0) == 0.0
    assert wake_after(pts, 0.0005) == pytest.approx(0.00005)
    assert wake_after(pts, 0.013) == pytest.approx(0.0001 + 0.0019 * 0.5)
    assert wake_after(pts, 0.5) == pytest.approx(0.0022)            # beyond the last pause: its figure
    env = simpy.Environment()
    etcd = SimEtcd(env, read_s=0.002, write_s=0.010)
    etcd.wake_points = pts
    assert etcd.wake_s(1.0) == pytest.approx(0.0022) and etcd.wake_s(1.0) == 0.0   # asked: awake
    net = SimNetwork(env, random.Random(0), NET)
    etcd.last_active = -float("inf")
    times = []

    def reads():
        yield from etcd_call(net, env, "n", lambda: etcd.get("/k"), server=etcd)    # idle since -inf
        times.append(round(env.now, 6))
        yield from etcd_call(net, env, "n", lambda: etcd.get("/k"), server=etcd)    # 2 ms after its answer
        times.append(round(env.now, 6))
    env.process(reads())
    env.run()
    # wire 1 ms each way and a 2 ms read; +2.2 ms for the first (never asked before), +0.179 ms for
    # the second, which reaches etcd 2 ms after it answered the first
    assert times == [0.0062, 0.010379]


def test_a_calibration_with_bad_wake_points_is_refused_with_the_field_named(tmp_path):
    for bad in ([[0.001]], [[0.005, 0.001], [0.001, 0.002]], "fast", [[0.001, float("nan")]]):
        p = tmp_path / "cal.json"
        p.write_text(json.dumps({"etcd_wake_s": bad}))
        with pytest.raises(HarnessError, match="etcd_wake_s"):
            Calibration.load(p)
    p.write_text(json.dumps({"etcd_wake_s": [[0.001, 0.0001], [0.025, 0.002]], "kill_teardown_s": 0.031}))
    cal = Calibration.load(p)
    assert cal.etcd_wake_s == [[0.001, 0.0001], [0.025, 0.002]] and cal.kill_teardown_s == 0.031
    assert Calibration(**cal.to_json()).to_json() == cal.to_json()
