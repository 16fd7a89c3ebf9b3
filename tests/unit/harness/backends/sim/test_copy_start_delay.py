"""A copy's calibrated start time (node_start_s): after a restart it refuses calls, loads its
local checkpoint only when its server would be up (serve.py's order), and serves from then on; a kill during the
start leaves it down."""
from __future__ import annotations

from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.proto import ps_pb2

DELAY = 0.25


def answers(cl, name) -> bool:
    out = []

    def ask() -> Gen:
        try:
            yield from cl.copies[name].serve_status(ps_pb2.StatusRequest(), cl.env.now + 0.05)
            out.append(True)
        except PSError:
            out.append(False)
    cl.env.process(ask())
    cl.env.run(until=cl.env.now + 0.06)
    return out[0]


def settled(seed: int) -> SimShardCluster:
    """A 3-copy shard up and running at t=3, every later (re)start taking DELAY."""
    cl = SimShardCluster(seed)
    for c in cl.copies.values():
        c.start_delay_s = DELAY
    cl.env.run(until=3.0)
    return cl


def test_a_restarted_copy_refuses_calls_for_its_start_time_then_serves():
    cl = settled(3)
    c = cl.copies["shard-0/2"]
    assert answers(cl, "shard-0/2")
    c.kill()
    cl.env.run(until=4.0)
    c.restart()
    t0 = cl.env.now
    assert c.alive and not answers(cl, "shard-0/2")           # a process, but no server yet
    cl.env.run(until=t0 + DELAY + 0.01)
    assert answers(cl, "shard-0/2")
    starts = [e["t"] for e in cl.history.events if e.get("f") == "start" and e.get("node") == "shard-0/2"]
    assert len(starts) == 2 and starts[1] >= t0 + DELAY          # serve.py's start, once its server is up


def test_a_copy_killed_while_starting_stays_down():
    cl = settled(4)
    c = cl.copies["shard-0/1"]
    c.kill()
    c.restart()
    cl.env.run(until=cl.env.now + DELAY / 2)
    c.kill()
    cl.env.run(until=cl.env.now + 1.0)
    assert not c.alive and not answers(cl, "shard-0/1")
    starts = [e for e in cl.history.events if e.get("f") == "start" and e.get("node") == "shard-0/1"]
    assert len(starts) == 1                                    # the second start never got as far
