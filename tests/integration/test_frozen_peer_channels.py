"""A copy that stands still for a while (a loaded machine deschedules it; here SIGSTOP for 1.2 s)
but lives must not lose its callers' connections: a call in flight is answered once it runs
again, and the next call on the same channel goes through.

Issue 13's first client keepalive (a 250 ms HTTP/2 ping timeout on every client channel) broke
both: the call in flight failed 'Stream removed (ping timeout)' and the next one failed at once
('connection attempt timed out before receiving SETTINGS frame'). That is how the fuzz run under
`make test` saw a replica 'stop answering Status' (the harness's be.status returns None on any
error) and a failover: a replica's probe of its primary (psnodes/replication/probe.py) on a channel so broken
fails at once, and the replica stands at the detector's floor instead of waiting out the probe.
The replacement (pschaos.psnodes.client.shard_calls.ShardCalls._call_primary) gives up calls to a deposed primary only."""
from __future__ import annotations

import threading
import time

import grpc

from pschaos.psnodes.proto import ps_pb2

FREEZE_S = 1.2


def test_a_live_copy_that_froze_keeps_its_callers_connections(make_cluster):
    be = make_cluster(shards=1, copies=3, replication="sync")
    node = [n for n in be.cfg.shard_nodes(0) if n != be.routing()[0].primary][0]
    stub = be.client.stub(node)
    assert be.status(node) is not None
    results = []
    for _ in range(3):
        out: dict = {}

        def status() -> None:
            try:
                out["r"] = stub.Status(ps_pb2.StatusRequest(), timeout=5.0, metadata=be.client.md).node
            except grpc.RpcError as e:
                out["r"] = f"{e.code().name}: {e.details()}"
        be.pause(node)
        try:
            call = threading.Thread(target=status)
            call.start()
            time.sleep(FREEZE_S)
        finally:
            be.resume(node)
        call.join()
        results.append(out["r"])
        time.sleep(0.3)
    assert results == [node] * 3, f"calls to a live copy that froze {FREEZE_S} s failed: {results}"
