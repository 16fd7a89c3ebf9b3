"""Which keys move in a migration, between which shards, and how a hand-off resolves.

A migration takes the cluster from placement over shard set `src` to placement over `dst`
(pschaos.psnodes.placement). A key moves when its owner differs between the two; with rendezvous
hashing that is only keys whose new highest weight is an added shard, or keys of a removed
shard. The coordinator (psnodes/elastic/migration.py) copies each (from, to) pair's keys while training
goes on, fences every source for its outgoing keys, ships the delta, and switches the routing
record by compare-and-swap; these functions decide what it does, with plain values only.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Sequence

from pschaos.psnodes.placement import owner, pinned_shard, row_owners


def moving_out(name: str, me: int, src: Sequence[int], dst: Sequence[int]) -> bool:
    """Does dense `name`, owned by shard `me` under `src`, belong elsewhere under `dst`?"""
    if pinned_shard(name) is not None:
        return False              # a shard's own audit tensor never moves: it counts that shard's applies
    return owner(name, src) == me and owner(name, dst) != me


def moving_to(name: str, me: int, to: int, src: Sequence[int], dst: Sequence[int]) -> bool:
    return moving_out(name, me, src, dst) and owner(name, dst) == to


def rows_moving_to(table: str, ids, me: int, to: int, src: Sequence[int], dst: Sequence[int]):
    """Mask of the ids (a numpy array) of `table` that move from shard `me` to shard `to`."""
    return (row_owners(table, ids, src) == me) & (row_owners(table, ids, dst) == to)


def rows_moving_out(table: str, ids, me: int, src: Sequence[int], dst: Sequence[int]):
    return (row_owners(table, ids, src) == me) & (row_owners(table, ids, dst) != me)


def pairs(src: Sequence[int], dst: Sequence[int]) -> list[tuple[int, int]]:
    """Every (from, to) pair that may carry keys: from a source shard to any other target shard.
    With rendezvous placement most are empty for a pure add or removal; their exports are then
    empty too, which costs one call and nothing else."""
    return [(a, b) for a in sorted(src) for b in sorted(dst) if a != b]


def sources(src: Sequence[int], dst: Sequence[int]) -> list[int]:
    """The shards that are fenced: every source shard (one whose keys may leave)."""
    return sorted(src)


def retired(src: Sequence[int], dst: Sequence[int]) -> list[int]:
    """Shards that own nothing after the switch: their groups stop once it landed."""
    return sorted(set(src) - set(dst))


def moved_fraction(names: Iterable[str], src: Sequence[int], dst: Sequence[int]) -> float:
    names = [n for n in names if pinned_shard(n) is None]
    if not names:
        return 0.0
    return sum(owner(n, src) != owner(n, dst) for n in names) / len(names)


def rows_moved_fraction(table: str, ids, src: Sequence[int], dst: Sequence[int]) -> float:
    if ids.size == 0:
        return 0.0
    return float((row_owners(table, ids, src) != row_owners(table, ids, dst)).mean())


class Step(str, Enum):
    RETRY = "retry"            # the shard's primary did not answer: look it up again and retry
    ABORT = "abort"            # give up before the switch: unfence, the old routing stays
    WAIT = "wait"              # after the fence, with etcd silent: the switch may have landed; wait


@dataclass(frozen=True)
class Failure:
    phase: str                 # "copy", "fence", "delta", "switch"
    elapsed_s: float
    etcd_reachable: bool


def on_failure(f: Failure, give_up_s: float) -> Step:
    """What the coordinator does when a step failed. Before the switch the old routing is valid,
    so a migration that cannot go on aborts once `give_up_s` passed; but the abort itself needs
    etcd (its compare-and-swap is what makes a late switch fail), so without etcd it waits."""
    if f.elapsed_s < give_up_s:
        return Step.RETRY
    if f.phase in ("fence", "delta", "switch") and not f.etcd_reachable:
        return Step.WAIT
    return Step.ABORT
