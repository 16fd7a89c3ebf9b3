"""A primary whose pushes and pulls wait still answers its replicas' probes (detector review 2, M1).

Every call used to share one pool of RPC threads: sync pushes waiting for their replicas and
BSP/SSP pulls held at the barrier (up to 10 s) could take them all, and a replica's probe then
queued behind them, went unanswered in its wait, and the replica replaced a live primary. Now at
most `rpc_threads - rpc_reserve` such calls hold a thread (psnodes/wire/bulkhead.py); one more is
refused UNAVAILABLE before it applies anything, and a call its client cancelled frees its thread.
Pulls may take all waiting slots but a quarter (at least one): a BSP/SSP barrier is ended by a
push, which must find a slot however many pulls wait (final review of issue 13, M2).
The node here is real (an in-process gRPC server on 127.0.0.1: 6 threads, 4 for waiting calls,
3 of them for pulls).
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import grpc
import numpy as np
import pytest

from pschaos.psnodes.wire.channels import auth, dial
from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.errors import ConfigError
from pschaos.psnodes.replication.probe import PrimaryProbe
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc

from tests.unit.inproc import start

WAIT_S = 5.0            # the held pulls' deadline: far past every check below
PULLS = 3               # 6 threads - 2 reserved = 4 waiting slots, one of them never a pull's


@pytest.fixture
def cluster(tmp_path):
    ip = start(tmp_path, rpc_threads=6, rpc_reserve=2)      # 4 waiting slots, 3 of them for pulls
    ch = dial(ip.cfg.addresses[ip.nodes[0].name], ip.cfg.max_message_bytes)
    ip.stub = ps_pb2_grpc.ParameterServerStub(ch)
    held: list[grpc.Future] = []
    ip.held = held
    yield ip
    for f in held:
        f.cancel()
    ch.close()
    ip.close()


def _barrier_pull(ip) -> grpc.Future:
    """A BSP pull no worker's clock can satisfy: its handler waits at the barrier until WAIT_S."""
    req = ps_pb2.PullRequest(shard=0, epoch=1, min_clock=1_000_000, worker="worker-0")
    f = ip.stub.Pull.future(req, timeout=WAIT_S, metadata=auth(ip.cfg.token))
    ip.held.append(f)
    return f


def _settle(futs: list[grpc.Future], s: float = 0.4) -> tuple[list[grpc.Future], list[grpc.Future]]:
    """(still waiting, finished) after `s` seconds: a refusal comes back at once."""
    time.sleep(s)
    return [f for f in futs if not f.done()], [f for f in futs if f.done()]


def _probe(ip) -> PrimaryProbe:
    return PrimaryProbe(SimpleNamespace(links=dict(ip.cfg.addresses), cfg=ip.cfg))


def test_a_primary_full_of_waiting_pulls_answers_the_probe(cluster):
    node = cluster.nodes[0]
    probe = _probe(cluster)
    try:
        assert probe.clears(node.name, 1, timeout=2.0)        # the probe's channels are up
        waiting, done = _settle([_barrier_pull(cluster) for _ in range(6)])
        assert len(waiting) == PULLS, "the bulkhead admits rpc_threads - rpc_reserve waiting calls, a quarter not pulls"
        assert all(f.exception() is not None and f.exception().code() == grpc.StatusCode.UNAVAILABLE
                   for f in done), [f.exception() for f in done]
        t0 = time.monotonic()
        assert probe.clears(node.name, 1, timeout=0.5), "the probe queued behind waiting pulls"
        assert time.monotonic() - t0 < 0.5
        assert all(not f.done() for f in waiting)            # ... while the pulls still held their slots
    finally:
        probe.close()


def _push(shard_req_id: int) -> ps_pb2.PushRequest:
    upd = ps_pb2.Update(kind=ps_pb2.Update.INIT, worker="worker-0", incarnation=1, req_id=shard_req_id,
                        dense=[tensor_to_pb(f"w{shard_req_id}", np.ones(3, np.float32))])
    return ps_pb2.PushRequest(shard=0, epoch=1, update=upd)


def test_a_push_gets_a_slot_while_pulls_wait_at_the_barrier(cluster):
    """The old single limit: the pulls took every slot and the push that ends the barrier was refused."""
    waiting, _ = _settle([_barrier_pull(cluster) for _ in range(6)])
    assert len(waiting) == PULLS
    rep = cluster.stub.Push(_push(1), timeout=2.0, metadata=auth(cluster.cfg.token))
    assert (rep.seq, rep.duplicate) == (1, False)


def test_a_push_refused_at_the_bulkhead_applied_nothing_and_its_retry_applies_once(cluster, monkeypatch):
    node = cluster.nodes[0]
    md = auth(cluster.cfg.token)
    waiting, _ = _settle([_barrier_pull(cluster) for _ in range(PULLS)])
    assert len(waiting) == PULLS
    release, real = threading.Event(), node.push

    def held(req, *a, **kw):                  # a push that waits (as a sync push for its replicas)
        if req.update.req_id == 99:
            release.wait(WAIT_S)
        return real(req, *a, **kw)
    monkeypatch.setattr(node, "push", held)
    slow = cluster.stub.Push.future(_push(99), timeout=WAIT_S, metadata=md)
    cluster.held.append(slow)
    time.sleep(0.2)                           # every waiting slot is taken now
    with pytest.raises(grpc.RpcError) as e:
        cluster.stub.Push(_push(1), timeout=2.0, metadata=md)
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "nothing was applied" in e.value.details()
    assert node.store.seq == 0
    assert node.metrics.busy.labels(method="Push")._value.get() == 1
    release.set()
    slow.result(timeout=2.0)
    for f in waiting:
        f.cancel()
    end = time.monotonic() + 2.0
    while True:                               # the slots come back within a poll
        try:
            rep = cluster.stub.Push(_push(1), timeout=2.0, metadata=md)
            break
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() < end, err
            time.sleep(0.05)
    assert (rep.duplicate, node.store.seq) == (False, 2)
    again = cluster.stub.Push(_push(1), timeout=2.0, metadata=md)
    assert (again.duplicate, node.store.seq) == (True, 2)


def test_a_cancelled_waiting_call_frees_its_thread(cluster):
    """The deposed-primary watch cancels calls; their handlers used to wait to the deadline."""
    first, _ = _settle([_barrier_pull(cluster) for _ in range(PULLS)])
    assert len(first) == PULLS
    for f in first:
        f.cancel()
    time.sleep(0.2)                          # the barrier wait polls every 50 ms
    again, refused = _settle([_barrier_pull(cluster) for _ in range(PULLS)])
    assert len(again) == PULLS, f"pulls refused though every earlier one was cancelled: {[f.exception() for f in refused]}"


@pytest.mark.parametrize("fields, words", [
    ({"rpc_reserve": 0}, "rpc_reserve=0 must be at least 1"),
    ({"rpc_threads": 8, "rpc_reserve": 8}, "rpc_reserve=8 must be at least 1 and leave at least 2 of rpc_threads=8"),
    ({"rpc_threads": 8, "rpc_reserve": 7}, "rpc_reserve=7 must be at least 1 and leave at least 2"),  # one slot
    ({"rpc_threads": 2, "rpc_reserve": 1}, "rpc_threads=2 must be between 3 and 1024"),
    ({"rpc_threads": 2.5}, "rpc_threads=2.5 must be a whole number"),
])
def test_bad_thread_settings_are_refused_by_name(fields, words):
    with pytest.raises(ConfigError, match=words):
        ClusterConfig(cluster_id="c", etcd="http://127.0.0.1:9", **fields)
