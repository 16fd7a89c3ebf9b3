"""pschaos.harness.backends.sim.etcd as a server process: killed, started again, paused (the `kill`, `stop`,
`restart` and `pause` faults on `etcd`), and etcd_call waiting on a paused server."""
import random

import pytest
import simpy

from pschaos.harness.backends.sim.etcd import Change, SimEtcd
from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.rpc import etcd_call
from pschaos.psnodes.etcd import EtcdError


def test_a_killed_server_refuses_every_call_and_expires_nothing_while_down():
    env = simpy.Environment()
    etcd = SimEtcd(env)
    lease = etcd.grant(2)
    etcd.put("/k", "v", lease=lease)
    etcd.crash()
    for call in [lambda: etcd.get("/k"), lambda: etcd.put("/x", "v"), lambda: etcd.keepalive(lease),
                 lambda: etcd.grant(2)]:
        with pytest.raises(EtcdError, match="server is down"):
            call()
    assert not etcd.healthy()
    env.run(until=10)                    # far past the lease's deadline: no lessor runs, nothing goes
    assert etcd.changes == [Change(0, 2, "put", "/k", "put")]


def test_a_restarted_server_keeps_its_data_and_refreshes_every_lease_to_extend_plus_ttl():
    env = simpy.Environment()
    etcd = SimEtcd(env, promote_extend_s=0.5)
    a, b = etcd.grant(2), etcd.grant(5)
    etcd.put("/a", "1", lease=a)
    etcd.put("/b", "2", lease=b)
    etcd.crash()
    env.run(until=4)
    etcd.start()
    assert etcd.healthy() and etcd.get("/a").value == b"1"
    assert etcd.lease_deadline(a) == 4 + 0.5 + 2 and etcd.lease_deadline(b) == 4 + 0.5 + 5
    env.run(until=6.4)
    assert etcd.keepalive(a) == 2        # its holder is in time: kept
    env.run(until=20)
    assert etcd.get("/a") is None and etcd.get("/b") is None
    assert [(c.t, c.key, c.cause) for c in etcd.changes[-2:]] == [(8.4, "/a", "expire"), (9.5, "/b", "expire")]


def test_a_paused_server_holds_calls_until_thawed_or_their_timeout_and_expires_late_leases_at_the_thaw():
    env = simpy.Environment()
    etcd = SimEtcd(env)
    net = SimNetwork(env, random.Random(0))
    lease = etcd.grant(1)
    etcd.put("/k", "v", lease=lease)
    out = []

    def caller(at, timeout):
        yield env.timeout(at)
        try:
            kv = yield from etcd_call(net, env, "shard-0/0", lambda: etcd.get("/k"), timeout=timeout, server=etcd)
            out.append((at, round(env.now, 3), "ok", kv is not None))
        except EtcdError as e:
            out.append((at, round(env.now, 3), "error", "paused" in str(e)))

    def nemesis():
        yield env.timeout(0.5)
        etcd.freeze()
        yield env.timeout(2.0)
        assert etcd.changes[-1].cause == "put"   # the lease's deadline (1.0) passed while frozen
        etcd.thaw()

    env.process(nemesis())
    env.process(caller(0.6, 0.5))        # times out while paused
    env.process(caller(2.2, 1.0))        # answered at the thaw, after the late lease expired
    env.run()
    assert out == [(0.6, 1.1, "error", True), (2.2, 2.501, "ok", False)]
    assert etcd.changes[-1] == Change(2.5, 3, "delete", "/k", "expire")


def test_killing_a_paused_server_refuses_the_calls_it_held():
    env = simpy.Environment()
    etcd = SimEtcd(env)
    net = SimNetwork(env, random.Random(0))
    out = []

    def caller():
        try:
            yield from etcd_call(net, env, "worker-0", lambda: etcd.get("/k"), timeout=5.0, server=etcd)
            out.append("ok")
        except EtcdError as e:
            out.append((round(env.now, 3), str(e)))

    etcd.freeze()
    env.process(caller())
    env.run(until=1)
    etcd.crash()
    env.run()
    assert len(out) == 1 and out[0][0] == 1 and "server is down" in out[0][1]
