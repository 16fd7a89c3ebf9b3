"""A Replicate's entries are the replica's once they arrived, whatever happens to the primary
while the replica spends the call's CPU (review of the CPU model, H1: the call runs in the
caller's SimPy process, so a primary killed meanwhile cancelled the replica's CPU job and the
handler never ran; in async mode that took back an update the primary had acked)."""
from __future__ import annotations

import simpy

from pschaos.psnodes.config import ClusterConfig
from pschaos.harness.backends.sim.pushclient import SimShardCluster


def cluster():
    cfg = ClusterConfig(cluster_id="sim", etcd="sim://etcd", shards=1, copies=2, workers=1, mode="async", seed=1,
                        min_isr=1)
    cl = SimShardCluster(1, cfg)
    cpu = cl.attach_cpu(4)
    cl.env.run(until=2.0)
    p = cl.primary()
    return cl, next(c for c in cl.copies.values() if c is not p)


def served_under_a_dying_caller(work_after: bool) -> bool:
    cl, rep = cluster()
    ran: list = []

    def handler():
        ran.append(cl.env.now)
        return "ok"
        yield  # noqa: unreachable - a generator, as every handler is

    def call():
        try:
            yield from rep.serve(handler, cl.env.now + 1.0, work=0.05, work_after=work_after)
        except simpy.Interrupt:
            pass                                     # the caller's death: it waits for nothing more
    caller = cl.env.process(call())
    cl.env.run(until=cl.env.now + 0.01)          # inside the callee's 50 ms of CPU
    caller.interrupt("the caller was killed")
    cl.env.run(until=cl.env.now + 0.2)
    return bool(ran)


def test_a_handler_with_its_cpu_after_runs_though_its_caller_dies():
    assert served_under_a_dying_caller(work_after=True)
    assert not served_under_a_dying_caller(work_after=False)      # a push or pull: the caller's to lose


def test_replicate_takes_its_entries_before_it_spends_the_cpu(monkeypatch):
    cl, rep = cluster()
    seen: dict = {}
    real = type(rep).serve

    def spy(self, handler, deadline, watch=None, work=0.0, work_after=False):
        seen[self.name] = work_after
        return real(self, handler, deadline, watch, work, work_after)
    monkeypatch.setattr(type(rep), "serve", spy)
    cl.env.run(until=cl.env.now + 1.0)                         # heartbeats: Replicate calls
    assert seen.get(rep.name) is True


def test_a_call_into_a_copy_killed_during_its_cpu_fails_unavailable_not_a_crash():
    """SimPy throws a failed event's exception rebuilt from its args: SimRpcError took two and
    kept one, so a copy killed while a call spent its CPU (cpu.abort_owner) crashed the run with
    a TypeError (make test's sim report fixture, nemesis-partitions)."""
    from pschaos.harness.backends.sim.rpc import SimRpcError

    e = SimRpcError("UNAVAILABLE", "shard-0/1 went down")
    again = type(e)(*e.args)
    assert (again.status, str(again)) == ("UNAVAILABLE", "UNAVAILABLE: shard-0/1 went down")
    cl, rep = cluster()
    out: list = []

    def handler():
        return "ok"
        yield  # noqa: unreachable - a generator, as every handler is

    def call():
        try:
            out.append((yield from rep.serve(handler, cl.env.now + 1.0, work=0.05)))
        except SimRpcError as err:
            out.append(err.status)
    cl.env.process(call())
    cl.env.run(until=cl.env.now + 0.01)
    rep.kill()
    cl.env.run(until=cl.env.now + 0.2)
    assert out == ["UNAVAILABLE"]
