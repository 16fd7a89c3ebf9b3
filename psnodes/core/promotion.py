"""Who serves a shard next: the promoted candidate, or the copy that restores.

A candidate is a copy's position (epoch of its last entry, seq). Only in-sync ISR members stand
(a copy restarted from disk may miss acked updates until it caught up); the most up-to-date one
wins, lowest slot first among equals, as in Raft's up-to-date rule. The new ISR is the winner and
the candidates at exactly its position. When no ISR copy is alive, the live copies post their
positions and, after every ISR copy's lease surely expired, the newest one restores: from its own
state or the shard's checkpoint, whichever is newer.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Mapping, Sequence

from pschaos.psnodes.placement import parse_node_name


@dataclass(frozen=True)
class Position:
    """Where a copy's history ends: the epoch of its last entry, and its seq."""

    seq_epoch: int
    seq: int

    @classmethod
    def of(cls, d: Mapping[str, int]) -> "Position":
        """From the JSON a candidate posts in etcd: {"seq": .., "seq_epoch": ..}."""
        return cls(int(d["seq_epoch"]), int(d["seq"]))

    def key(self) -> tuple[int, int]:
        return (self.seq_epoch, self.seq)


def rank(name: str, pos: Position) -> tuple[int, int, int]:
    """Newest position first, then the lowest replica slot."""
    return (pos.seq_epoch, pos.seq, -parse_node_name(name)[1])


def best(cands: Mapping[str, Position]) -> str:
    """The candidate that should win."""
    return max(cands, key=lambda n: rank(n, cands[n]))


def eligible(me: str, isr: Sequence[str], in_sync: bool) -> bool:
    """A copy may stand for promotion only as an ISR member that matched a primary since it started."""
    return me in isr and in_sync


@dataclass(frozen=True)
class Election:
    """The outcome of a candidate window: who should win, and the ISR if it is us."""

    winner: str
    isr: list[str]


def elect(me: str, mine: Position, posted: Mapping[str, Position], isr: Sequence[str],
          old_primary: str) -> Election:
    """Among the posted candidates of the ISR (never the old primary; ourselves always), who wins;
    the new ISR is the winner and the candidates at exactly its position."""
    cands = {n: c for n, c in posted.items() if n in isr and n != old_primary}
    if me not in cands:
        cands[me] = mine
    winner = best(cands)
    same = [n for n, c in cands.items() if c.key() == mine.key()]
    return Election(winner, [me] + sorted(n for n in same if n != me))


def candidate_event(shard: int, against: int, me: str, mine: Position, isr: Sequence[str], old_primary: str) -> dict:
    """The `candidate` event of a copy that just posted its position against epoch `against`
    (emitted after the put returned, before its first read of the postings): the copies' own word
    for what each posted, which a checker holds the winner's view to (a posting that returned
    before the winner's own did is one its read cannot have missed)."""
    return {"shard": shard, "epoch": against, "node": me, "seq_epoch": mine.seq_epoch, "seq": mine.seq,
            "isr": list(isr), "primary": old_primary}


def elected_event(shard: int, epoch: int, me: str, mine: Position, posted: Mapping[str, Position],
                  isr: Sequence[str], old_primary: str) -> dict:
    """The `elected` event of a candidate that won its window: its own position and every
    candidate it saw (the ISR's postings, never the old primary's), so a checker can tell whether
    the most up-to-date copy took over (harness/checkers/promotion.py)."""
    cands = {n: c for n, c in posted.items() if n in isr and n != old_primary}
    cands[me] = mine
    return {"shard": shard, "epoch": epoch, "node": me, "seq_epoch": mine.seq_epoch, "seq": mine.seq,
            "candidates": {n: [c.seq_epoch, c.seq] for n, c in sorted(cands.items())}}


def all_posted(me: str, posted: Iterable[str], isr: Sequence[str], old_primary: str) -> bool:
    """Every ISR copy that may stand (all but the old primary) has posted its candidacy: the
    candidate window may close at once, since no later candidate can change who wins (an ISR
    copy that never posts, dead or still hearing the primary, keeps the window open to its end)."""
    posted = set(posted) | {me}
    return all(n in posted for n in isr if n != old_primary)


def isr_copy_alive(me: str, isr: Sequence[str], announced: Mapping[str, Mapping]) -> bool:
    """Some other ISR copy is alive and in sync (its lease key says so): no restore. A copy of the
    ISR that restarted from disk is alive but not in sync, and does not count."""
    def in_sync(v: Mapping) -> bool:
        return bool(v.get("in_sync") or v.get("role") == "primary")

    return any(n in announced and in_sync(announced[n]) for n in isr if n != me)


class Orphan(str, Enum):
    """Where a copy stands in the wait before a restore."""

    START = "start"      # first tick without any ISR copy: start the clock
    WAIT = "wait"        # an ISR copy's lease may still live
    DECIDE = "decide"    # every ISR copy's lease surely expired: choose who restores


def orphan_phase(orphan_since: float | None, now: float, lease_ttl_s: float, suspect_s: float) -> Orphan:
    """The restore waits a lease TTL plus a suspect period from the first orphaned tick."""
    if orphan_since is None:
        return Orphan.START
    return Orphan.WAIT if now - orphan_since < lease_ttl_s + suspect_s else Orphan.DECIDE


def restorer(me: str, mine: Position, posted: Mapping[str, Position], live: Iterable[str],
             waited: float, lease_ttl_s: float, suspect_s: float) -> str | None:
    """Who restores among the live copies that posted their position (None: wait, a live copy has
    not said what it holds yet and may hold more than we do; up to twice the restore wait)."""
    live = list(live)
    cands = {n: c for n, c in posted.items() if n in live}
    cands[me] = mine
    if any(n not in cands for n in live) and waited < 2 * (lease_ttl_s + suspect_s):
        return None
    return best(cands)


def restore_from_checkpoint(mine: Position, checkpoint: Position | None) -> bool:
    """Restore from the shared checkpoint only when it is newer than this copy by (epoch of the
    last entry, seq); else keep this copy's own state."""
    return checkpoint is not None and checkpoint.key() > mine.key()
