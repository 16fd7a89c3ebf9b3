"""pschaos.harness.backends.sim.etcd: revisions, ranges and compare-and-swap as psnodes/etcd.py's client sees them."""
import inspect

import pytest
import simpy

from pschaos.harness.backends.sim.etcd import Change, SimEtcd
from pschaos.psnodes.etcd import KV, Etcd, EtcdError

API = ["get", "get_prefix", "put", "delete", "cas", "grant", "keepalive", "revoke", "healthy"]


def test_same_methods_and_arguments_as_the_real_client():
    for name in API:
        real, sim = inspect.signature(getattr(Etcd, name)), inspect.signature(getattr(SimEtcd, name))
        assert [(p.name, p.default) for p in real.parameters.values()] == \
               [(p.name, p.default) for p in sim.parameters.values()], name


def test_revisions_move_once_per_write_and_never_for_nothing():
    etcd = SimEtcd(simpy.Environment())
    assert etcd.revision == 1 and etcd.get("/k") is None
    etcd.put("/k", "a")
    assert etcd.get("/k") == KV("/k", b"a", 2, 0)
    etcd.put("/k", b"a")
    assert etcd.get("/k").mod_revision == 3
    etcd.delete("/missing")
    assert etcd.revision == 3
    etcd.delete("/k")
    assert (etcd.revision, etcd.get("/k")) == (4, None)
    assert etcd.changes == [Change(0, 2, "put", "/k", "put"), Change(0, 3, "put", "/k", "put"),
                            Change(0, 4, "delete", "/k", "delete")]


def test_get_prefix_is_sorted_by_key_and_stays_under_the_prefix():
    etcd = SimEtcd(simpy.Environment())
    for k in ["/n/b", "/n/a", "/nx", "/n/c", "/m"]:
        etcd.put(k, k)
    assert [kv.key for kv in etcd.get_prefix("/n/")] == ["/n/a", "/n/b", "/n/c"]
    assert etcd.get_prefix("/none/") == []


def test_cas_succeeds_on_the_right_revision_and_fails_on_a_stale_one():
    etcd = SimEtcd(simpy.Environment())
    assert etcd.cas("/shard", 0, "e1")                      # 0: absent
    assert not etcd.cas("/shard", 0, "again")               # present now
    rev = etcd.get("/shard").mod_revision
    assert etcd.cas("/shard", rev, "e2")
    assert not etcd.cas("/shard", rev, "e3")                # stale
    assert (etcd.get("/shard").value, etcd.revision) == (b"e2", 3)


def test_also_put_writes_every_key_at_one_revision_with_its_lease():
    etcd = SimEtcd(simpy.Environment())
    lease = etcd.grant(5)
    assert etcd.cas("/shard", 0, "rec", also_put=[("/leader", "n0", lease), ("/loss", b"{}", 0)])
    assert [etcd.get(k) for k in ["/shard", "/leader", "/loss"]] == \
           [KV("/shard", b"rec", 2, 0), KV("/leader", b"n0", 2, lease), KV("/loss", b"{}", 2, 0)]


def test_also_compare_fails_the_txn_when_a_node_key_changed():
    etcd = SimEtcd(simpy.Environment())
    etcd.put("/shard", "rec")
    etcd.put("/nodes/a", "in-sync")
    seen = {"/nodes/a": etcd.get("/nodes/a").mod_revision, "/nodes/b": 0}
    etcd.put("/nodes/a", "out-of-sync")                     # changed since it was read
    before = etcd.revision
    assert not etcd.cas("/shard", 2, "new", also_put=[("/leader", "a", 0)], also_compare=list(seen.items()))
    assert (etcd.revision, etcd.get("/shard").value, etcd.get("/leader")) == (before, b"rec", None)
    seen["/nodes/a"] = etcd.get("/nodes/a").mod_revision
    assert etcd.cas("/shard", 2, "new", also_compare=list(seen.items()))
    etcd.put("/nodes/b", "appeared")                        # 0 compared: absent, not any more
    assert not etcd.cas("/shard", etcd.revision - 1, "newer", also_compare=[("/nodes/b", 0)])


def test_refusals_match_etcd():
    etcd = SimEtcd(simpy.Environment())
    with pytest.raises(EtcdError, match="requested lease not found"):
        etcd.put("/k", "v", lease=99)
    with pytest.raises(EtcdError, match="requested lease not found"):
        etcd.cas("/k", 0, "v", also_put=[("/l", "v", 99)])
    assert not etcd.cas("/k", 7, "v", lease=99)             # the failure path puts nothing
    with pytest.raises(EtcdError, match="duplicate key"):
        etcd.cas("/k", 7, "v", also_put=[("/k", "w", 0)])
    assert (etcd.revision, etcd.changes) == (1, [])
