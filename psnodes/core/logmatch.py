"""Log matching: does a peer hold a prefix of our history, and what does it lack.

As in Raft, a position is (seq, epoch of the entry at seq): the same seq and the same epoch mean
the same history up to there; the same seq alone does not (a copy restarted from an old
checkpoint of another branch can share it). What a lagging peer is sent follows from that:
nothing new (a heartbeat), recent log entries, a state delta, or a full snapshot when its history
diverged from ours.
"""
from __future__ import annotations

from enum import Enum
from typing import Iterable, Sequence

LOG_CATCHUP_MAX = 64          # a peer this many entries behind gets log entries, else a delta


def epoch_of(epochs: Sequence[Sequence[int]], seq: int) -> int:
    """Epoch of the entry at `seq` (0 for seq 0), from the epoch history [[epoch, first seq], ...]."""
    e = 0
    for epoch, first in epochs:
        if first <= seq:
            e = epoch
        else:
            break
    return e


def matches(epochs: Sequence[Sequence[int]], last_seq: int, seq: int, epoch: int) -> bool:
    """True when a copy at (seq, epoch) holds a prefix of the history ending at `last_seq`."""
    return seq == 0 or (seq <= last_seq and epoch_of(epochs, seq) == epoch)


class SyncKind(str, Enum):
    """What a sender ships to its peer next (the value is the name the events and metrics use)."""

    HEARTBEAT = "heartbeat"   # nothing to send, or the peer's position is unknown: just "I live"
    SNAPSHOT = "snapshot"     # the peer's history diverged from ours: replace its state
    LOG = "log"               # a few entries behind and our log still reaches back
    DELTA = "delta"           # further behind, or our log was trimmed past it: changed keys


def choose_sync(known: int | None, peer_matches: bool, seq: int, log_base_seq: int,
                log_max: int = LOG_CATCHUP_MAX) -> SyncKind:
    """What to send a peer known to be at `known` (None: unknown; `peer_matches`: its position
    matches our history) when we are at `seq` and our log starts after `log_base_seq`."""
    if known is None or known == seq and peer_matches:
        return SyncKind.HEARTBEAT
    if not peer_matches:
        return SyncKind.SNAPSHOT
    if seq - known <= log_max and known >= log_base_seq:
        return SyncKind.LOG
    return SyncKind.DELTA


def idle_wait(known: int | None, seq: int, last_sent: float, now: float, heartbeat_s: float) -> float:
    """How long a sender waits before its next call to a peer known to be at `known` (we are at
    `seq`, our last call to it left at `last_sent`): none while the peer lacks entries or its
    position is unknown, else until its next heartbeat is due.

    Why a deadline and not one wait per wake-up: a primary's senders share one condition, and each
    reply notifies it (an ack, a lease renewal). A sender that sent a heartbeat whenever it woke
    answered every reply of its sibling with a heartbeat of its own, whose reply woke the sibling:
    a ping-pong at RPC rate on an idle shard (about 6,000 calls a second per peer, counted on a
    simulated soak), burning the CPU the heartbeats' timing depends on."""
    if known is None or known < seq:
        return 0.0
    return max(0.0, last_sent + heartbeat_s - now)


def caught_up(known: int, peer_matches: bool, seq: int) -> bool:
    """A peer is caught up when it holds exactly our history: it may rejoin the ISR."""
    return known == seq and peer_matches


def catchup_kind(kinds: Iterable[str]) -> SyncKind:
    """What a whole catch-up was, from the kinds of its calls: the costliest one it needed."""
    kinds = set(kinds)
    if SyncKind.SNAPSHOT.value in kinds:
        return SyncKind.SNAPSHOT
    return SyncKind.DELTA if SyncKind.DELTA.value in kinds else SyncKind.LOG
