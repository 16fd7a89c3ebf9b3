"""A cluster configured with `barrier: false` (no worker trains BSP/SSP) keeps no membership: its
copies run no watch (no etcd polls, no record, no member-view) and refuse a gated pull naming the
field; with `barrier: true` the same pull is served (members-review.md #11: every copy polled
etcd at 10 Hz and primaries wrote a record even in async training)."""
from __future__ import annotations

from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.errors import InvalidArgument
from pschaos.psnodes.membership.members import record_key
from pschaos.psnodes.proto import ps_pb2
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen

from .test_copy_pull_status import CFG, pull


def run(barrier: bool) -> dict:
    cl = SimShardCluster(7, ClusterConfig(**CFG, barrier=barrier))
    out: dict = {}

    def scenario() -> Gen:
        yield from cl.clock.sleep(1.0)
        try:
            out["pull"] = yield from pull(cl, ps_pb2.PullRequest(shard=0, min_clock=0, worker="worker-0"),
                                          timeout=0.5)
        except Exception as e:  # noqa: BLE001 - the refusal is the finding
            out["pull"] = e
        out["views"] = [c.members for c in cl.copies.values()]
        out["record"] = cl.etcd.get(record_key(cl.cfg))

    cl.env.process(scenario())
    cl.env.run(until=3.0)
    return out


def test_without_a_barrier_no_copy_keeps_membership_and_a_gated_pull_is_refused():
    off = run(False)
    assert isinstance(off["pull"], InvalidArgument) and "barrier: true" in str(off["pull"])
    assert off["views"] == [None, None, None] and off["record"] is None


def test_with_a_barrier_the_copies_gate_by_a_generation():
    on = run(True)
    assert isinstance(on["pull"], ps_pb2.PullReply)
    assert all(v is not None for v in on["views"]) and on["record"] is not None
