"""Fencing by epoch: who a copy listens to, and what a replica tells its primary.

Every promotion bumps the epoch in etcd by a compare-and-swap, so the epoch orders primaries. A
replica refuses replication from a lower epoch (a deposed primary then steps down) and follows a
higher one; a client that knows a newer epoch than a node's is sent away. A replica that became a
candidate against its primary says so in its replies (`suspecting`): those replies renew no
follower lease, so the old primary stops acking before the candidate can win.
"""
from __future__ import annotations

import math
from enum import Enum
from typing import Mapping, Sequence


class Replicate(str, Enum):
    """What a copy does with a replicate call."""

    REFUSE_STALE = "refuse-stale"        # the caller's epoch is older than ours
    REFUSE_PRIMARY = "refuse-primary"    # we are ourselves primary at the caller's epoch
    FOLLOW = "follow"                    # a newer epoch, or a primary we do not follow yet: adopt it
    ACCEPT = "accept"                    # our own primary: apply what it sends


def on_replicate(epoch: int, role: str, primary: str, req_epoch: int, req_primary: str) -> Replicate:
    """The fencing rule for a replicate call from `req_primary` at `req_epoch`."""
    if req_epoch < epoch:
        return Replicate.REFUSE_STALE
    if req_epoch > epoch or role != "replica" or primary != req_primary:
        if role == "primary" and req_epoch == epoch:
            return Replicate.REFUSE_PRIMARY
        return Replicate.FOLLOW
    return Replicate.ACCEPT


def replicate_refusal(verdict: Replicate, name: str, epoch: int, req_epoch: int, req_primary: str) -> str:
    """Why a replicate call is refused, in words both shells send back ('' when it is not)."""
    if verdict is Replicate.REFUSE_STALE:
        return f"replicate from {req_primary} at epoch {req_epoch} refused: {name} is at epoch {epoch}"
    if verdict is Replicate.REFUSE_PRIMARY:
        return f"{name} is itself primary at epoch {epoch}"
    return ""


def serve_refusal(role: str, epoch: int, client_epoch: int) -> str:
    """Why a client request at `client_epoch` is not served here ('' when it is): only the
    primary serves, and not while a client has seen a newer epoch than ours."""
    if role != "primary":
        return "not-primary"
    if client_epoch > epoch:
        return "client-newer"
    return ""


def serve_refusal_words(name: str, shard: int, role: str, epoch: int, primary: str, client_epoch: int) -> str:
    """`serve_refusal` in the words both shells send back ('' when the request is served)."""
    why = serve_refusal(role, epoch, client_epoch)
    if why == "not-primary":
        hint = f"; primary is {primary}" if primary else ""
        return f"{name} is not the primary of shard {shard} (epoch {epoch}){hint}"
    if why:
        return f"{name} is at epoch {epoch} but the client knows epoch {client_epoch}"
    return ""


def suspecting(candidate_against: int, req_epoch: int) -> bool:
    """The reply flag: we stand as a candidate against the primary of `req_epoch`."""
    return candidate_against == req_epoch


def renews_follower_lease(reply_epoch: int, epoch: int, reply_suspecting: bool) -> bool:
    """A reply renews the sender's follower lease only when the peer follows that very epoch and
    is not standing against it."""
    return reply_epoch == epoch and not reply_suspecting


class Entry(str, Enum):
    """What a copy at some seq does with one replicated entry."""

    SKIP = "skip"        # it holds it already (a resend after a lost reply)
    APPLY = "apply"      # exactly the next seq
    GAP = "gap"          # entries are missing before it: stop, the sender resends from our seq


def take_entry(seq: int, entry_seq: int) -> Entry:
    """Entries apply strictly in order, each exactly once."""
    if entry_seq <= seq:
        return Entry.SKIP
    return Entry.APPLY if entry_seq == seq + 1 else Entry.GAP


def reached_sync(in_sync: bool, seq: int, seq_epoch: int, primary_seq: int, primary_seq_epoch: int) -> bool:
    """A copy is in sync once its last entry equals the primary's (seq and epoch), not just its
    length: a copy restarted from an old checkpoint of another branch can share the seq alone."""
    return in_sync or (seq == primary_seq and seq_epoch == primary_seq_epoch)


def doubts_epoch(me: str, isr: Sequence[str], peer_heard: Mapping[str, float], now: float,
                 floor_s: float) -> bool:
    """A primary should read the shard record: some ISR peer accepted none of its calls (without
    standing against it) for the suspicion floor, so that peer may be a candidate by now. A
    primary cut off from its replicas learns of its successor from etcd within a heartbeat of
    the promotion, instead of when its calls to them time out (its clients' pushes wait on it)."""
    return any(peer_heard.get(p, -math.inf) <= now - floor_s for p in isr if p != me)


def names_me(record_epoch: int | None, record_primary: str | None, epoch: int, me: str) -> bool:
    """The shard record in etcd still names us as the primary of `epoch`: anything else means our
    epoch is over (or was never ours), whatever we believe."""
    return record_epoch == epoch and record_primary == me


def deposed_by(record_epoch: int | None, epoch: int) -> bool:
    """A fenced primary follows the record's epoch when it is newer; else it keeps its epoch with
    no known primary until the elector reads the route again."""
    return record_epoch is not None and record_epoch > epoch


def follow_record(record_epoch: int, epoch: int, record_primary: str, me: str) -> bool:
    """The shard record in etcd names a newer epoch led by someone else: follow it."""
    return record_epoch > epoch and record_primary != me


def self_refusal(name: str, req_primary: str) -> str:
    """A replicate call naming this very copy as its sender is forged (a copy never replicates to
    itself): refused before any verdict, since a copy that stepped down at some epoch would
    otherwise 'follow' itself at it ('' when the sender is another copy)."""
    if req_primary == name:
        return f"replicate naming {name} itself as primary refused: a copy never replicates to itself"
    return ""


def sender_refusal(record_epoch: int | None, record_primary: str | None, req_epoch: int, req_primary: str) -> str:
    """Why a replicate call from `req_primary` at `req_epoch` is not from a primary at all, judged by
    the shard record ('' when the record names exactly that primary at exactly that epoch). Epochs
    come from the record, never from the wire alone: one above the record's is refused too."""
    if record_epoch is None:
        return "the shard has no record in etcd"
    if req_epoch > record_epoch:
        return f"epoch {req_epoch} does not exist: the shard record is at epoch {record_epoch}"
    if req_epoch < record_epoch:
        return f"epoch {req_epoch} is over: the shard record is at epoch {record_epoch} ({record_primary})"
    if req_primary != record_primary:
        return f"the shard record names {record_primary}, not {req_primary}, as primary of epoch {req_epoch}"
    return ""


def bootstrap_epoch(retired_epoch: int, seq_epoch: int) -> int:
    """The epoch of a shard record created where there is none: 1 for a new shard, and above every
    epoch of an earlier life of it: the last epoch its retired record had (`retired_epoch`, 0 when
    none) and the epoch of this copy's last entry on disk. A re-added group's copies still hold the
    old life's entries; a new life counting from 1 again would let log matching take an old
    (seq, epoch) for a new one, and a restore take the old life's state for the newest."""
    return max(retired_epoch, seq_epoch) + 1
