"""One shard's copies at the scale level, and the decisions psnodes' core makes for them.

A copy is up or down and, when up, in sync or catching up. Whether the primary may ack
(`pschaos.psnodes.core.ack.replicated`), whether the ISR may shrink or must refuse (`isr.change`: sync
mode keeps `min_isr` copies or stops acking), what a returning copy is sent (`logmatch`: log
entries, a delta, or a snapshot when its history diverged), who is promoted (`promotion.elect`),
which live copy restores an orphaned shard and whether from its own state or the checkpoint
(`promotion.restorer`, `restore_from_checkpoint`): each is the call the real node and the
per-RPC twin make, on positions this level keeps as (epoch of the last entry, seq) with the
shard's epoch history, as psnodes keeps them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pschaos.psnodes.core import isr as isr_rules
from pschaos.psnodes.core import logmatch, promotion
from pschaos.psnodes.core.ack import Replicas, replicated
from pschaos.psnodes.core.promotion import Position


@dataclass
class Copy:
    name: str
    up: bool = True
    in_sync: bool = True
    seq: int = 0             # the history it holds ends at seq ...
    seq_epoch: int = 1       # ... written in this epoch
    incarnation: int = 0     # bumps when it fails or comes back: its pending catch-up is then stale
    life: int = 0            # bumps when it fails or is repaired: a pending failure/repair event is then stale


@dataclass
class Shard:
    index: int
    copies: list[Copy]
    mode: str = "sync"
    min_isr: int = 2
    epoch: int = 1
    primary: int | None = 0
    isr: list[str] = field(default_factory=list)
    epochs: list[list[int]] = field(default_factory=lambda: [[1, 1]])   # [epoch, first seq], as psnodes
    serving: bool = True          # a primary is in place (it acks when _refresh says so)
    token: int = 0                # bumps on every change of primary: stale events are dropped
    orphan_since: float | None = None
    orphan_ready: bool = False    # the restore wait is over: the first live copy restores
    checkpoint: Position | None = None
    pending_drop: set = field(default_factory=set)   # dead ISR members the primary still waits for
    refused: set = field(default_factory=set)        # dead members a drop was refused for (min_isr)
    fail_t0: float | None = None  # when the primary was lost (the failover's clock), until acks resume
    fail_spurious: bool = False

    @classmethod
    def new(cls, index: int, copies: int, mode: str, min_isr: int) -> "Shard":
        cs = [Copy(f"shard-{index}/{r}") for r in range(copies)]
        return cls(index, cs, mode, min_isr, isr=[c.name for c in cs])

    @staticmethod
    def slot(name: str) -> int:
        return int(name.rsplit("/", 1)[1])

    def copy(self, name: str) -> Copy:
        return self.copies[self.slot(name)]

    def acks(self, head: int) -> bool:
        """Whether the primary may ack `head` now (pschaos.psnodes.core.ack.replicated: every ISR member
        applied it; sync mode refuses an ISR under min_isr). A dead or catching-up member has not."""
        if self.primary is None or not self.serving or not self.copies[self.primary].up:
            return False
        me = self.copies[self.primary].name
        peer = {c.name: (c.seq if c.up and c.in_sync else -1) for c in self.copies}
        peer[me] = head
        if self.mode == "async":      # acks do not wait for replicas; a dead member only until dropped
            return not self.pending_drop
        return replicated(Replicas(me, self.isr, peer, self.mode, self.min_isr), head)

    def drop(self, name: str) -> bool:
        """The primary drops a dead ISR member (False: refused, the shard stops acking)."""
        ch = isr_rules.change(self.isr, remove=name, mode=self.mode, min_isr=self.min_isr)
        if ch.refused:
            return False
        self.isr = ch.isr
        return True

    def rejoin(self, name: str) -> None:
        self.isr = isr_rules.change(self.isr, add=name, mode=self.mode, min_isr=self.min_isr).isr

    def catchup_kind(self, c: Copy, head: int, log_entries: int) -> logmatch.SyncKind:
        """What the primary sends a returning copy: its position must be a prefix of the shard's
        history (logmatch.matches on the epoch history), else a snapshot."""
        ok = logmatch.matches(self.epochs, head, c.seq, c.seq_epoch)
        return logmatch.choose_sync(c.seq, ok, head, max(0, head - log_entries))

    def elect(self, failed: str) -> str | None:
        """The promoted copy among live in-sync ISR members (never the one that failed), by the
        core's up-to-date rule; None when none stands."""
        stand = {c.name: Position(c.seq_epoch, c.seq) for c in self.copies
                 if c.up and c.in_sync and promotion.eligible(c.name, self.isr, True) and c.name != failed}
        if not stand:
            return None
        me = min(stand, key=self.slot)
        return promotion.elect(me, stand[me], stand, self.isr, failed).winner

    def promote(self, winner: str) -> None:
        self.epoch += 1
        self.token += 1
        self.primary = self.slot(winner)
        w = self.copies[self.primary]
        same = [c.name for c in self.copies if c.up and c.in_sync and c.seq == w.seq and c.name != winner]
        self.isr = [winner] + same
        for c in self.copies:
            if c.name not in self.isr:
                c.in_sync = False
        # entries above the winner's are gone from the shard's history (a restore from an older
        # state, or an async primary's unreplicated tail): the new epoch starts after its seq
        self.epochs = [e for e in self.epochs if e[1] <= w.seq] + [[self.epoch, w.seq + 1]]
        self.serving, self.orphan_since, self.orphan_ready = True, None, False
        self.pending_drop.clear()
        self.refused.clear()

    def restore(self) -> tuple[str, int] | None:
        """An orphaned shard: the newest live copy restores, from its state or the checkpoint,
        whichever is newer (pschaos.psnodes.core.promotion). Returns (copy, seq it holds) or None."""
        live = [c for c in self.copies if c.up]
        if not live:
            return None
        posted = {c.name: Position(c.seq_epoch, c.seq) for c in live}
        me = live[0].name
        who = promotion.restorer(me, posted[me], posted, posted, float("inf"), 0.0, 0.0)
        c = self.copy(who)
        if promotion.restore_from_checkpoint(Position(c.seq_epoch, c.seq), self.checkpoint):
            c.seq, c.seq_epoch = self.checkpoint.seq, self.checkpoint.seq_epoch
        c.in_sync = True
        self.promote(who)
        return who, c.seq
