"""One shard's copies at the scale level, and the decisions psnodes' core makes for them.

A copy is up or down and, when up, in sync or catching up. Who is promoted, whether the ISR may
shrink or must refuse (sync mode keeps `min_isr` copies or stops acking), what a returning copy
is sent (log entries, a delta or a snapshot), which live copy restores an orphaned shard and
whether from its own state or the checkpoint: each is the call the real node and the per-RPC
twin make (psnodes/core), on positions this level keeps as (epoch of the last entry, seq).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from psnodes.core import isr as isr_rules
from psnodes.core import logmatch, promotion
from psnodes.core.ack import Replicas, replicated
from psnodes.core.promotion import Position


@dataclass
class Copy:
    name: str
    up: bool = True
    in_sync: bool = True
    seq: int = 0             # acked history it holds (seq of its last entry)
    seq_epoch: int = 1
    incarnation: int = 0


@dataclass
class Shard:
    index: int
    copies: list[Copy]
    mode: str = "sync"
    min_isr: int = 2
    epoch: int = 1
    primary: int | None = 0
    isr: list[str] = field(default_factory=list)
    serving: bool = True          # a primary is in place and acks
    token: int = 0                # bumps on every change of primary: stale events are dropped
    orphan_since: float | None = None
    checkpoint: Position | None = None
    pending_drop: set = field(default_factory=set)   # dead ISR members the primary still waits for
    orphan_ready: bool = False    # the restore wait is over: the first live copy restores
    lost_events: int = 0

    @classmethod
    def new(cls, index: int, copies: int, mode: str, min_isr: int) -> "Shard":
        cs = [Copy(f"shard-{index}/{r}") for r in range(copies)]
        return cls(index, cs, mode, min_isr, isr=[c.name for c in cs])

    def slot(self, name: str) -> int:
        return int(name.rsplit("/", 1)[1])

    def acks(self, seq: int) -> bool:
        """Whether the primary may ack now (psnodes.core.ack: every ISR member applied it; sync
        mode refuses an ISR under min_isr). Members are caught up here, so `seq` stands for theirs."""
        if self.primary is None or not self.serving:
            return False
        me = self.copies[self.primary].name
        peer = {c.name: (c.seq if c.up and c.in_sync else -1) for c in self.copies}
        peer[me] = seq
        return replicated(Replicas(me, self.isr, peer, self.mode, self.min_isr), min(seq, peer[me]))

    def drop(self, name: str) -> bool:
        """The primary drops a silent ISR member (False: refused, the shard stops acking)."""
        ch = isr_rules.change(self.isr, remove=name, mode=self.mode, min_isr=self.min_isr)
        if ch.refused:
            return False
        self.isr = ch.isr
        return True

    def rejoin(self, name: str) -> None:
        ch = isr_rules.change(self.isr, add=name, mode=self.mode, min_isr=self.min_isr)
        self.isr = ch.isr

    def catchup_kind(self, c: Copy, head: int, log_entries: int) -> logmatch.SyncKind:
        """What the primary sends a returning copy (its history matches unless it is from another
        epoch's branch beyond the last common entry)."""
        matches = c.seq_epoch <= self.epoch
        return logmatch.choose_sync(c.seq, matches, head, max(0, head - log_entries))

    def elect(self, failed: str) -> str | None:
        """The promoted copy among live in-sync ISR members (never the one that failed), by the
        core's up-to-date rule; None when none stands."""
        stand = {c.name: Position(c.seq_epoch, c.seq) for c in self.copies
                 if c.up and c.in_sync and promotion.eligible(c.name, self.isr, True) and c.name != failed}
        if not stand:
            return None
        me = min(stand, key=self.slot)
        e = promotion.elect(me, stand[me], stand, self.isr, failed)
        return e.winner

    def promote(self, winner: str, seq: int) -> None:
        self.epoch += 1
        self.token += 1
        self.primary = self.slot(winner)
        w = self.copies[self.primary]
        same = [c.name for c in self.copies if c.up and c.in_sync and c.seq == w.seq and c.name != winner]
        self.isr = [winner] + same
        for c in self.copies:
            if c.name not in self.isr:
                c.in_sync = False
        w.seq_epoch = self.epoch
        self.serving = True
        self.orphan_since = None

    def restore(self, now_seq: int) -> tuple[str, int] | None:
        """An orphaned shard: the newest live copy restores, from its state or the checkpoint,
        whichever is newer (psnodes.core.promotion). Returns (copy, seq it restored) or None."""
        live = [c for c in self.copies if c.up]
        if not live:
            return None
        posted = {c.name: Position(c.seq_epoch, c.seq) for c in live}
        me = live[0].name
        who = promotion.restorer(me, posted[me], posted, posted, 1e9, 0.0, 0.0) or me
        c = self.copies[self.slot(who)]
        mine = Position(c.seq_epoch, c.seq)
        if promotion.restore_from_checkpoint(mine, self.checkpoint):
            c.seq, c.seq_epoch = self.checkpoint.seq, self.checkpoint.seq_epoch
        c.in_sync = True
        self.lost_events += 1
        self.promote(who, c.seq)
        return who, c.seq
