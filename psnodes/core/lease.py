"""The etcd lease and failure detection: how long a copy may act on what it last heard.

A copy restores the shard once every ISR copy's etcd lease expired, so a primary acks only while
its lease surely lives: until the send time of its last confirmed keepalive plus the TTL, less a
margin. A primary that etcd has not answered for a whole TTL steps down (its heartbeats stop, so
the replicas elect a primary etcd can hear). A replica suspects its primary when the replication
stream was silent for as long as its failure detector asks (pschaos.psnodes.core.detector: never less
than the floor that the async follower lease assumes). Every time here is a number on the
shell's monotonic clock.
"""
from __future__ import annotations

import math


def valid(now: float, lease_until: float) -> bool:
    """The etcd lease surely lives at `now` (inf: a node run without etcd holds no lease)."""
    return now < lease_until


def renewed(lease_until: float, sent: float, ttl: float, margin_s: float) -> float:
    """The lease bound after etcd confirmed the lease at some moment after `sent` for `ttl`: from
    the send time, less a margin, and never moved back by a late answer to an older keepalive."""
    until = sent + ttl - margin_s
    return until if lease_until == math.inf else max(lease_until, until)


def keepalive_timeout(lease_until: float, sent: float, ttl: float) -> float:
    """How long a keepalive may take: as long as the lease may still live (a slow answer renews it
    all the same, from the send time), at most a TTL and never under half a second."""
    left = lease_until - sent
    return min(float(ttl), max(0.5, left if left != math.inf else 1.0))


def etcd_silent(now: float, lease_seen: float, ttl: float) -> bool:
    """A primary steps down once etcd confirmed no keepalive for a whole TTL."""
    return now - lease_seen > ttl


def suspects(now: float, last_heard: float, silence_s: float) -> bool:
    """A replica suspects its primary after `silence_s` of silence, what its detector asks now
    (and stands only if it is still silent once the replica became a candidate)."""
    return now - last_heard >= silence_s


def after_election_error(last_heard: float, now: float, silence_s: float, heartbeat_s: float) -> float:
    """The `last_heard` to keep after an election attempt failed (etcd unreachable): try again
    four heartbeats later rather than on every tick (`silence_s`: what the detector asks now).
    Never after `now`: with a silence under four heartbeats (phi's floor is 150 ms) it would land
    in the future, and the `suspect` event's silence and the detector's stats would go negative."""
    return min(now, max(last_heard, now - silence_s + heartbeat_s * 4))
