"""The twin's probe of a primary (harness/backends/sim/copy/election.py `held_back`) against the real one
(psnodes/replication/election.py Elector.held_back, psnodes/replication/probe.py PrimaryProbe.clears):

- once one path answered, the paths still in flight are cancelled (the real code cancels their
  futures), not left running to their deadline;
- a primary with no link marks the silence probed before the probe fails (the real code sets
  `probed` first, and `clears` then answers False for a missing link);
- a probe of a frozen primary fails at its own deadline: a Status call's give-up is the caller's
  deadline, not 20 ms past it (the server-side margin was added to the caller's deadline).

Each failed on the code before."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from pschaos.harness.backends.sim.copy import probe
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core import detector

START_T = 1.0


def settled(seed: int = 3) -> tuple[SimShardCluster, ShardRecord]:
    """A one-shard cluster after its bootstrap, and its shard record."""
    cl = SimShardCluster(seed)
    cl.env.run(until=START_T)
    kv = cl.etcd.get(cl.cfg.shard_key(0))
    return cl, ShardRecord.from_json(kv.value)


def run_held_back(cl: SimShardCluster, name: str, rec: ShardRecord, out: dict) -> None:
    el = cl.procs[name].election

    def go() -> Gen:
        out["start"] = cl.env.now
        out["heard"] = el.c.last_heard
        out["held"] = yield from el.held_back(rec)
        out["end"] = cl.env.now
    cl.env.process(go())


def test_once_a_path_answers_the_other_paths_are_cancelled(monkeypatch) -> None:
    cl, rec = settled()
    assert cl.cfg.probe_paths > 1
    ends: list[str] = []
    made: list[int] = []

    def call(net, src, dst, alive, handler, req_bytes, reply_bytes, deadline, *a, **kw) -> Gen:
        made.append(1)                     # the first path answers at once, the others late
        first = len(made) == 1
        try:
            yield cl.env.timeout(0.001 if first else 0.2)
            ends.append("done")
            return SimpleNamespace(role="primary" if first else "replica", epoch=rec.epoch)
        except BaseException:
            ends.append("cancelled")
            raise
    monkeypatch.setattr(probe, "call", call)       # every path of harness/backends/sim/copy/probe.py's probe
    out: dict = {}
    run_held_back(cl, "shard-0/1", rec, out)
    cl.env.run(until=START_T + 0.5)
    assert out["held"] is True
    assert out["end"] == pytest.approx(START_T + 0.001)
    # the others were ended when the probe returned, not at their own time
    assert ends == ["done"] + ["cancelled"] * (cl.cfg.probe_paths - 1), ends


def test_no_link_to_the_primary_marks_the_silence_probed_and_fails() -> None:
    cl, rec = settled()
    el = cl.procs["shard-0/1"].election
    el.peers = {n: c for n, c in el.peers.items() if n != rec.primary}
    out: dict = {}
    run_held_back(cl, "shard-0/1", rec, out)
    cl.env.run(until=START_T + 0.1)
    assert out["held"] is False
    assert el.probed == out["heard"]          # as Elector.held_back: probed is set before the probe


def test_a_probe_of_a_frozen_primary_fails_at_its_deadline() -> None:
    cl, rec = settled()
    cl.copies[rec.primary].pause()
    el = cl.procs["shard-0/1"].election
    out: dict = {}
    run_held_back(cl, "shard-0/1", rec, out)
    cl.env.run(until=START_T + 1.0)
    assert out["held"] is False
    wait = detector.probe_wait(cl.cfg.probe_s, out["start"] - out["heard"], cl.cfg.suspect_s)
    assert out["end"] - out["start"] == pytest.approx(wait, abs=1e-6)
