"""The plain values a copy's sides hand one another: the Replicate call's request and reply, a
restore plan, and a PS client's call under the deposed-primary watch.

They know nothing of the copy, so they sit below every other module of the package: state.py's
protocol names them in its signatures, and the sides that make or read them import them from
here rather than from one another.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pschaos.psnodes.client.shard_calls import BARRIER_CHECK_S, DEPOSED_CHECK_S
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.store import ShardStore
from pschaos.psnodes.store.updatelog import Entry


@dataclass
class ReplicateReq:
    """psnodes' ReplicateRequest as plain values (the sim sizes it instead of encoding it)."""

    shard: int
    epoch: int
    primary: str
    entries: list[Entry]
    primary_seq: int
    epoch_start: int
    state: bytes
    primary_seq_epoch: int

    def nbytes(self) -> int:
        return 64 + len(self.state) + sum(16 + len(e.payload) for e in self.entries)


@dataclass
class ReplicateReply:
    applied_seq: int
    epoch: int
    suspecting: bool
    seq_epoch: int


@dataclass
class RestorePlan:
    """pschaos.psnodes.server.checkpointing.RestorePlan: the shared checkpoint loaded aside (`store`), or None to keep ours."""

    source: str          # "checkpoint@<seq>" or "local@<seq>"
    seq: int
    seq_epoch: int
    store: ShardStore | None
    loaded: dict | None = None    # the shared checkpoint it took (store.checkpoint.loaded), for the restore event


@dataclass
class ClientWatch:
    """A PS client's call under the deposed-primary watch (pschaos.psnodes.client.shard_calls.ShardCalls._call_primary):
    the caller (its link to etcd carries the watch's reads), the epoch its route named, and how
    often it looks at the record (DEPOSED_CHECK_S; BARRIER_CHECK_S for a BSP/SSP barrier pull)."""

    src: str
    epoch: int
    period: float = DEPOSED_CHECK_S
    start: float = 0.0       # when the call began (its request's arrival): the first look is the floor after it
    gone: bool = False       # the caller died: its watch reads no more (workers.py kill, cpu.abort_owner)


def client_watch(caller: str, req: Any, start: float = 0.0) -> ClientWatch:
    """The watch of a PS client's Push or Pull `req` from `caller`, begun at `start`."""
    barrier = isinstance(req, ps_pb2.PullRequest) and req.min_clock >= 0
    return ClientWatch(caller, req.epoch, BARRIER_CHECK_S if barrier else DEPOSED_CHECK_S, start)


__all__ = ["ClientWatch", "ReplicateReply", "ReplicateReq", "RestorePlan", "client_watch"]
