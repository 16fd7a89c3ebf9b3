"""When a primary may ack: the replication rule of its mode, and the two leases bounding it.

Sync mode acks a seq once every in-sync replica (ISR) member applied it and the ISR is at least
`min_isr` copies: a primary cut off from its replicas cannot shrink the ISR below that, so it
stops acking instead of acking what a failover would lose. Async mode acks at once but bounds how
far replicas trail (`max_lag`), and acks only under the follower lease: every ISR peer accepted
one of our replicate calls so recently that it cannot have suspected us yet, so no higher epoch
can exist without our knowing. Both modes ack only while the etcd lease surely lives
(pschaos.psnodes.core.lease).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Replicas:
    """What a primary knows of its ISR: members, and the seq each one applied (itself included)."""

    me: str
    isr: Sequence[str]
    peer_seq: Mapping[str, int] = field(default_factory=dict)
    mode: str = "sync"
    min_isr: int = 1


def replicated(r: Replicas, seq: int) -> bool:
    """Every ISR member applied `seq`, and (sync mode) the ISR is at least min_isr copies."""
    if r.mode == "sync" and len(r.isr) < r.min_isr:
        return False
    return all(r.peer_seq.get(p, 0) >= seq for p in r.isr if p != r.me)


def watermark(r: Replicas, own_seq: int) -> int:
    """The highest seq every ISR member applied (`own_seq` when the ISR is the primary alone): what
    a sync-mode read may show. A pull's reply carries it (PullReply.committed), so a read served
    past it is seen as it happens, with or without a failover to undo it."""
    return min([own_seq, *(r.peer_seq.get(p, 0) for p in r.isr if p != r.me)])


def lagging(r: Replicas, seq: int) -> list[str]:
    """The ISR peers that have not applied `seq` (named in the error a timed-out push returns)."""
    return [p for p in r.isr if p != r.me and r.peer_seq.get(p, 0) < seq]


def within_lag(r: Replicas, head_seq: int, max_lag: int) -> bool:
    """Async mode: no ISR peer trails the head by more than `max_lag` entries (a push that would
    leave one further behind waits)."""
    return replicated(r, head_seq - max_lag)


def followers_fresh(me: str, isr: Sequence[str], peer_heard: Mapping[str, float], now: float,
                    floor_s: float, margin_s: float) -> bool:
    """Async mode's follower lease: every ISR peer accepted a replicate call sent after
    `now - (floor_s - margin_s)` (send times, on the same clock as `now`). `floor_s` is the
    suspicion floor (ClusterConfig.suspect_floor_s): a peer's last_heard is at least that send
    time, and its detector never suspects before last_heard + floor_s (pschaos.psnodes.core.detector),
    whatever it learned of the stream; so the lease ends `margin_s` before any peer may stand."""
    bound = now - (floor_s - margin_s)
    return all(peer_heard.get(p, -math.inf) > bound for p in isr if p != me)


def silent(me: str, isr: Sequence[str], peer_heard: Mapping[str, float]) -> list[str]:
    """ISR peers that never accepted a replicate call of this epoch."""
    return [p for p in isr if p != me and p not in peer_heard]
