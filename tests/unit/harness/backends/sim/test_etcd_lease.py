"""pschaos.harness.backends.sim.etcd: leases in virtual time, and etcd going down."""
import pytest
import simpy

from pschaos.harness.backends.sim.etcd import Change, SimEtcd
from pschaos.psnodes.etcd import EtcdError


def test_a_kept_alive_lease_expires_at_exactly_keepalive_plus_ttl_and_its_keys_vanish_then():
    env = simpy.Environment()
    etcd, trace = SimEtcd(env), []

    def node():
        lease = etcd.grant(2)
        etcd.put("/nodes/a", "up", lease=lease)
        trace.append((env.now, "grant", etcd.lease_deadline(lease)))
        yield env.timeout(1.5)
        trace.append((env.now, "keepalive", etcd.keepalive(lease), etcd.lease_deadline(lease)))

    def probe():
        for t in [3.25, 3.5, 4.0]:
            yield env.timeout(t - env.now)
            trace.append((env.now, "probe", etcd.get("/nodes/a") is not None))

    env.process(node())
    env.process(probe())
    env.run()
    assert trace == [(0, "grant", 2.0), (1.5, "keepalive", 2, 3.5),
                     (3.25, "probe", True), (3.5, "probe", False), (4.0, "probe", False)]
    assert etcd.changes == [Change(0, 2, "put", "/nodes/a", "put"), Change(3.5, 3, "delete", "/nodes/a", "expire")]


def test_expiry_is_driven_by_the_environment_without_any_call():
    env = simpy.Environment()
    etcd = SimEtcd(env)
    lease = etcd.grant(3)
    for k in ["/b", "/a", "/c"]:
        etcd.put(k, "v", lease=lease)
    etcd.put("/c", "detached")                              # a put without lease detaches the key
    env.run(until=10)
    assert [(c.t, c.revision, c.key, c.cause) for c in etcd.changes[4:]] == \
           [(3, 6, "/a", "expire"), (3, 6, "/b", "expire")]
    assert [kv.key for kv in etcd.get_prefix("/")] == ["/c"]


def test_a_lease_is_dead_at_its_deadline_whatever_the_event_order():
    for keepalive_first in (True, False):
        env = simpy.Environment()
        etcd, got = SimEtcd(env), []

        def late():
            yield env.timeout(2)
            got.append(etcd.keepalive(1))

        if keepalive_first:
            env.process(late())
        etcd.grant(2)
        if not keepalive_first:
            env.process(late())
        env.run()
        assert got == [0] and etcd.lease_deadline(1) is None


def test_gone_leases_min_ttl_and_revoke():
    env = simpy.Environment()
    etcd = SimEtcd(env, min_ttl=1, first_lease=7)
    short, held = etcd.grant(0), etcd.grant(5)
    assert (short, held, etcd.lease_deadline(short)) == (7, 8, 1.0)
    etcd.put("/held", "v", lease=held)
    env.run(until=1)
    assert etcd.keepalive(short) == 0
    with pytest.raises(EtcdError, match="requested lease not found"):
        etcd.put("/k", "v", lease=short)
    etcd.revoke(held)
    etcd.revoke(held)                                       # unknown: swallowed, as the client does
    assert etcd.changes[-1] == Change(1, 3, "delete", "/held", "revoke")
    env.run(until=10)                                       # the revoked lease's old deadline passes quietly
    assert etcd.revision == 3


def test_down_every_call_raises_the_clients_error_and_leases_keep_expiring():
    env = simpy.Environment()
    etcd = SimEtcd(env)
    lease = etcd.grant(2)
    etcd.put("/k", "v", lease=lease)
    etcd.available = False
    calls = [lambda: etcd.get("/k"), lambda: etcd.get_prefix("/"), lambda: etcd.put("/x", "v"),
             lambda: etcd.delete("/k"), lambda: etcd.cas("/k", 2, "w"), lambda: etcd.grant(2),
             lambda: etcd.keepalive(lease)]
    for call in calls:
        with pytest.raises(EtcdError, match="unreachable"):
            call()
    etcd.revoke(lease)                                      # swallowed, and nothing revoked
    assert not etcd.healthy() and etcd.revision == 2
    env.run(until=3)
    assert etcd.changes[-1] == Change(2, 3, "delete", "/k", "expire")
    etcd.available = True
    assert etcd.healthy() and etcd.get("/k") is None and etcd.keepalive(lease) == 0
