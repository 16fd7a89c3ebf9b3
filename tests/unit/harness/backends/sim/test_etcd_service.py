"""etcd's service time in the twin: exact virtual times for reads, writes (even a failed
compare), and a server that goes down or freezes while answering."""
from __future__ import annotations

import random

import pytest
import simpy

from pschaos.harness.backends.sim.etcd import SimEtcd
from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.rpc import etcd_call
from pschaos.psnodes.etcd import EtcdError

NET = {"fixed_s": 0.001, "per_byte_s": 0.0, "rto_s": 0.2, "rto_max_s": 60.0, "refused_s": 0.0005}


def world():
    env = simpy.Environment()
    return env, SimNetwork(env, random.Random(0), NET), SimEtcd(env, read_s=0.002, write_s=0.010)


def call(env, net, etcd, fn, out):
    def proc():
        t0 = env.now
        try:
            v = yield from etcd_call(net, env, "n", fn, timeout=1.0, server=etcd)
            out.append((round(env.now - t0, 6), "ok", v))
        except EtcdError as e:
            out.append((round(env.now - t0, 6), "error", str(e)))
    env.process(proc())


def test_a_read_costs_the_wire_both_ways_and_the_read_time_a_write_the_write_time():
    env, net, etcd = world()
    out = []
    call(env, net, etcd, lambda: etcd.put("/k", "v"), out)
    env.run()
    call(env, net, etcd, lambda: etcd.get("/k").value, out)
    env.run()
    call(env, net, etcd, lambda: etcd.cas("/k", 999, "w"), out)      # a failed compare still goes through raft
    env.run()
    call(env, net, etcd, lambda: etcd.grant(2), out)
    env.run()
    assert [(t, r) for t, r, _ in out] == [(0.012, "ok"), (0.004, "ok"), (0.012, "ok"), (0.012, "ok")]
    assert out[1][2] == b"v" and out[2][2] is False


def test_a_server_that_goes_down_while_answering_leaves_the_write_applied_and_the_caller_unsure():
    env, net, etcd = world()
    out = []
    call(env, net, etcd, lambda: etcd.put("/k", "v"), out)
    env.run(until=0.005)              # the request arrived at 0.001; the WAL's fsync runs until 0.011
    etcd.crash()
    env.run()
    assert out[0][1] == "error" and "may have been applied" in out[0][2]
    etcd.start()
    assert etcd.get("/k").value == b"v"


def test_a_server_frozen_while_answering_answers_after_the_thaw():
    env, net, etcd = world()
    out = []
    call(env, net, etcd, lambda: etcd.put("/k", "v"), out)
    env.run(until=0.005)
    etcd.freeze()
    env.run(until=0.5)
    etcd.thaw()
    env.run()
    assert out == [(pytest.approx(0.501), "ok", None)]
