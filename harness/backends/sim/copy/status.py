"""What a simulated copy says of itself: ShardNode.status's reply to a Status call, and the
fields the runner records as its `final-state`.

Both only read the copy (as state.py's CopyState) at one instant and take no virtual time, so
they sit apart from the handlers that change it; copy.py answers `status` and `final_state`
with them.
"""
from __future__ import annotations

import json

from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.moving import bucket_counts

from pschaos.harness.backends.sim.copy.state import CopyState


def status_reply(c: CopyState, req: ps_pb2.StatusRequest) -> ps_pb2.StatusReply:
    """ShardNode.status, at this instant (whatever the copy's state: see SimCopy.serve_status)."""
    if req.probe:               # ShardNode.probe_status: the probe's reduced answer
        return ps_pb2.StatusReply(node=c.name, shard=c.shard, role=c.role, epoch=c.epoch)
    reply = ps_pb2.StatusReply(
        node=c.name, shard=c.shard, role=c.role, epoch=c.epoch, seq=c.store.seq,
        isr=c.isr, log_start=c.store.log.base_seq, seq_epoch=c.store.seq_epoch,
        restored_from=c.restored_from, pushes=c.store.pushes,
        routing_epoch=c.store.routing_epoch, routing_shards=list(c.store.shards),
        fence=(c.store.fence or {}).get("migration", ""))
    if req.checksum:
        reply.checksum = c.store.checksum()
    if req.applied:
        reply.applied_json = json.dumps(c.store.applied.ranges)
    if req.audit:
        counts = c.store.audit_counts()
        reply.audit_json = "" if counts is None else json.dumps(counts, sort_keys=True)
        reply.buckets_json = json.dumps(bucket_counts(c.store), sort_keys=True)
    if req.holdings:
        reply.holdings_json = json.dumps(c.store.holdings(list(req.holdings_under)))
    return reply


def final_state_of(c: CopyState, under: list[int] | None = None) -> dict:
    """What the runner records as `final-state` for the copy (backend_process's fields); its
    holdings sorted by owner under `under` (None: the copy's own routing)."""
    st = {"node": c.name, "shard": c.shard, "alive": c.alive}
    if not c.alive:
        return st
    return {**st, "role": c.role, "epoch": c.epoch, "seq": c.store.seq,
            "checksum": c.store.checksum(), "pushes": c.store.pushes,
            "applied": {k: [list(r) for r in v] for k, v in c.store.applied.ranges.items()},
            "restored_from": c.restored_from, "audit": c.store.audit_counts(),
            "buckets": bucket_counts(c.store), "routing_epoch": c.store.routing_epoch,
            "routing_shards": list(c.store.shards), "fence": (c.store.fence or {}).get("migration", ""),
            "holdings": c.store.holdings(under or [])}


__all__ = ["final_state_of", "status_reply"]
