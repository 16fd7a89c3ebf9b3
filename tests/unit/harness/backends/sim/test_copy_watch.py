"""The twin's deposed-primary watch (harness/backends/sim/copy/process.py `_hold`) against the real one
(pschaos.psnodes.client.shard_calls.ShardCalls._call_primary): a push in flight to a paused (SIGSTOPped) primary is
given up when the shard record names a later epoch, not only another primary; each look at the
record is a read over the worker's own link to etcd, so a cut link or an etcd that is down is no
news and the call waits out its deadline (DEADLINE_EXCEEDED), as the real worker's does, instead
of failing at once with etcd's error. And the tiny push client's retry pauses are psnodes'
(pschaos.psnodes.core.retry: FIRST_S doubling to FAST_CAP_S). Each of these failed on the code before."""
from __future__ import annotations

import pytest

from pschaos.harness.backends.sim.network import DEADLINE_EXCEEDED, UNAVAILABLE
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import ETCD, Gen, SimRpcError, call
from pschaos.harness.backends.sim.transport import CLIENT_ETCD_TIMEOUT_S
from pschaos.psnodes.client.shard_calls import DEPOSED_CHECK_S
from pschaos.psnodes.core.retry import FAST_CAP_S
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.proto import ps_pb2

PAUSE_T = 3.0


def push_to_paused(seed: int, meddle, after: float = 0.0) -> tuple[SimShardCluster, dict]:
    """Pause the primary at PAUSE_T, let `meddle(cl)` act, then (`after` s later) push to it with
    a 2 s deadline; out["t"]: when the push ended, after its start."""
    cl = SimShardCluster(seed)
    old = cl.copies["shard-0/0"]
    out: dict = {}

    def scenario() -> Gen:
        yield from cl.clock.sleep(PAUSE_T)
        old.pause()
        meddle(cl)
        yield from cl.clock.sleep(after)
        upd = ps_pb2.Update(worker="worker-0", incarnation=1, req_id=1)
        req = ps_pb2.PushRequest(shard=0, epoch=1, update=upd)
        deadline = cl.env.now + 2.0
        try:
            out["reply"] = yield from call(cl.net, "worker-0", old.name, lambda: old.alive,
                                           lambda: old.push(req, deadline - 0.02), req.ByteSize(),
                                           lambda _r: 48, deadline)
        except Exception as e:  # noqa: BLE001 - what the call ended with is the test's subject
            out["error"] = e
        out["t"] = cl.env.now - PAUSE_T - after
    cl.env.process(scenario())
    cl.env.run(until=PAUSE_T + 3.0)
    return cl, out


def test_a_record_at_a_later_epoch_gives_the_call_up_even_naming_the_same_primary() -> None:
    def restore(cl: SimShardCluster) -> None:     # the record moves to epoch 2 (a restore) at once
        kv = cl.etcd.get(cl.cfg.shard_key(0))
        rec = ShardRecord.from_json(kv.value)
        cl.etcd.cas(cl.cfg.shard_key(0), kv.mod_revision, ShardRecord(rec.epoch + 1, rec.primary, rec.isr).to_json())
    cl, out = push_to_paused(5, restore)
    assert isinstance(out.get("error"), SimRpcError) and out["error"].status == UNAVAILABLE, out
    # the first look, at the detector's floor after the freeze (plus the read's round trip)
    assert out["t"] < cl.cfg.suspect_floor_s + DEPOSED_CHECK_S, out["t"]


def move_record(cl: SimShardCluster) -> None:
    """The record moves to epoch 2 (a restore) at once."""
    kv = cl.etcd.get(cl.cfg.shard_key(0))
    rec = ShardRecord.from_json(kv.value)
    cl.etcd.cas(cl.cfg.shard_key(0), kv.mod_revision, ShardRecord(rec.epoch + 1, rec.primary, rec.isr).to_json())


def test_the_first_look_is_the_floor_after_the_call_began_not_after_the_freeze() -> None:
    # a push begun 0.1 s into the freeze: the real client's first look at the record is the
    # detector's floor after *its* start (fut.result(timeout=floor)); the twin's grid began at the
    # freeze, so the call was given up 0.05 s after it began
    cl, out = push_to_paused(5, move_record, after=0.1)
    assert isinstance(out.get("error"), SimRpcError) and out["error"].status == UNAVAILABLE, out
    assert cl.cfg.suspect_floor_s <= out["t"] < cl.cfg.suspect_floor_s + 0.01, out["t"]


@pytest.mark.parametrize("fault", ["cut-link", "etcd-down"])
def test_a_watch_that_cannot_read_etcd_waits_out_the_deadline(fault: str) -> None:
    def cut(cl: SimShardCluster) -> None:
        if fault == "cut-link":
            cl.net.add_fault("partition", [f"worker-0->{ETCD}", f"{ETCD}->worker-0"])
        else:
            cl.etcd.crash()
    cl, out = push_to_paused(5, cut)
    err = out.get("error")
    assert isinstance(err, SimRpcError) and err.status == DEADLINE_EXCEEDED, out
    # at its deadline, or when the read in flight then ends (the real client reads in the calling
    # thread, with the 0.5 s client timeout: it notices the deadline after the read too)
    assert 2.0 <= out["t"] <= 2.0 + CLIENT_ETCD_TIMEOUT_S + 0.05, out["t"]


def test_the_push_clients_retry_pauses_are_psnodes() -> None:
    cl = SimShardCluster(3)
    c = cl.client()
    slept: list[float] = []

    class Recording:
        def sleep(self, s: float) -> Gen:
            slept.append(s)
            return (yield from cl.clock.sleep(s))
    c.clock = Recording()
    cl.env.process(c.run(until=6.0))
    cl.kill_at("shard-0/0", 3.0)
    cl.env.run(until=7.0)
    retries = [s for s in slept if s != 0.02]        # 0.02: the think time between pushes
    assert retries and max(retries) == FAST_CAP_S, sorted(set(retries))
