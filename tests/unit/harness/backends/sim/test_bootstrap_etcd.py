"""A copy that starts while etcd does not answer waits for it (Elector.bootstrap retries, as
register does) instead of dying: under load a real node died of one etcd ReadTimeout at
bootstrap and the run came out unknown or failed for it."""
from __future__ import annotations

from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen


def test_copies_that_meet_an_unanswering_etcd_at_bootstrap_wait_and_come_up():
    cl = SimShardCluster(5)
    hits = []
    real_get = cl.etcd.get

    def flaky_get(key):                  # etcd times out on the first bootstrap reads of each copy
        if "/shards/" in key and len(hits) < 6:
            hits.append(key)
            from pschaos.psnodes.etcd import EtcdError
            raise EtcdError("etcd at sim://etcd unreachable: ReadTimeout (simulated)")
        return real_get(key)
    cl.etcd.get = flaky_get

    def probe() -> Gen:
        yield from cl.clock.sleep(3.0)
    cl.env.process(probe())
    cl.env.run(until=3.0)
    assert len(hits) == 6
    assert all(c.alive for c in cl.copies.values())
    assert sorted(c.role for c in cl.copies.values()) == ["primary", "replica", "replica"]
    errs = [e for e in cl.history.events if e.get("f") == "election-error" and "bootstrap" in str(e.get("value"))]
    assert errs
