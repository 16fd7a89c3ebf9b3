"""The routing record: which shards own keys now, and the migration under way, if any.

It lives in etcd (psnodes/elastic/routing.py reads and compare-and-swaps it); this module holds its value
and the decisions about epochs. Every push and pull carries the routing epoch its client routed
by. A node whose store is at a newer routing epoch refuses the call as stale (the client re-reads
the record and re-routes); a client ahead of the node makes the node read the record first. No
record at all is routing epoch 0 over the config's shards 0..n-1: a cluster that never scaled.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class Migration:
    """A migration in progress: keys move from placement over `src` to placement over `dst`."""

    id: str
    src: tuple[int, ...]
    dst: tuple[int, ...]
    phase: str = "copy"          # copy -> fenced (then the switch clears it) | aborting


@dataclass(frozen=True)
class Routing:
    epoch: int
    shards: tuple[int, ...]
    migration: Migration | None = None


def static(num_shards: int) -> Routing:
    """The routing of a cluster whose record was never written: epoch 0, shards 0..n-1."""
    return Routing(0, tuple(range(num_shards)))


class Epochs(str, Enum):
    STALE = "stale"        # the caller routed by an older record: refuse, it re-routes
    SAME = "same"
    AHEAD = "ahead"        # the caller saw a newer record: read it before serving


def compare(caller: int, ours: int) -> Epochs:
    if caller < ours:
        return Epochs.STALE
    return Epochs.AHEAD if caller > ours else Epochs.SAME


def begin(current: Routing, mid: str, dst: tuple[int, ...]) -> Routing | str:
    """The record that announces a migration to shard set `dst`, or why none may begin."""
    dst = tuple(sorted(set(dst)))
    if current.migration is not None:
        return f"migration {current.migration.id} is still in progress (phase {current.migration.phase})"
    if not dst:
        return "the target shard set is empty"
    if dst == current.shards:
        return f"the cluster already has shards {list(dst)}"
    return Routing(current.epoch, current.shards, Migration(mid, current.shards, dst, "copy"))


def with_phase(current: Routing, mid: str, phase: str) -> Routing | str:
    if current.migration is None or current.migration.id != mid:
        return f"the routing record holds no migration {mid}"
    m = current.migration
    return Routing(current.epoch, current.shards, Migration(m.id, m.src, m.dst, phase))


def switched(current: Routing, mid: str) -> Routing | str:
    """The record after the hand-off: the next routing epoch over the target shards."""
    if current.migration is None or current.migration.id != mid:
        return f"the routing record holds no migration {mid}"
    return Routing(current.epoch + 1, current.migration.dst, None)


def aborted(current: Routing, mid: str) -> Routing | str:
    """The record after an abort: the same epoch and shards, no migration."""
    if current.migration is None or current.migration.id != mid:
        return f"the routing record holds no migration {mid}"
    return Routing(current.epoch, current.shards, None)


@dataclass(frozen=True)
class Restored:
    """What a copy that restored its shard appends before it serves (each None: nothing)."""

    unfence: str | None = None                       # lift the fence of this migration
    route: tuple[int, tuple[int, ...]] | None = None   # adopt this routing epoch and shard set
    fence: Migration | None = None                   # fence for this migration (a source of it)


def after_restore(shard: int, epoch: int, fenced_for: str | None, rec: Routing) -> Restored:
    """A copy that restored its shard (every ISR copy lost) holds the routing of the state it restored,
    a checkpoint's or its own disk's: routing epoch `epoch`, fenced for migration `fenced_for` or
    not. The record `rec` (read before its compare-and-swap, which also compares the record) may be
    past it: a switch that moved keys away (the coordinator's ROUTE found no primary to tell), or a
    migration fenced after the checkpoint (the old primary's FENCE was lost with it). Served as it
    is, the copy would ack keys at an epoch whose hand-off already shipped them (review 1d). So it
    adopts the record first: the record's epoch and shards; a fence when the record holds a fenced
    migration this shard is a source of; and the lifting of a fence the record no longer holds
    (that migration was aborted, and nobody is left to unfence this copy). A record behind the
    state (etcd lost data) changes nothing."""
    if rec.epoch < epoch:
        return Restored()
    route = (rec.epoch, tuple(rec.shards)) if rec.epoch > epoch else None
    held = None if route is not None else fenced_for          # a ROUTE lifts every fence
    m = rec.migration
    unfence = held if held is not None and (m is None or m.id != held) else None
    if unfence is not None:
        held = None
    fence = m if m is not None and m.phase == "fenced" and shard in m.src and held != m.id else None
    return Restored(unfence, route, fence)


__all__ = ["Migration", "Routing", "Epochs", "Restored", "compare", "static", "begin", "with_phase", "switched",
           "aborted", "after_restore"]
