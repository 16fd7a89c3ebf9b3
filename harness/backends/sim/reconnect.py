"""gRPC's reconnect backoff on one channel, in virtual time.

A real channel whose peer refused a connection (the peer was down, or still starting) does not
try again at its next call: it sits in TRANSIENT_FAILURE and reconnects on a timer, failing
every call meanwhile at once (UNAVAILABLE, nothing on the wire). The timer starts at
`grpc.initial_reconnect_backoff_ms` and grows 1.6x a failed attempt up to
`grpc.max_reconnect_backoff_ms`, each pause drawn within +-20% (gRPC core's defaults for the
multiplier and the jitter; the bounds are psnodes' own channel options, read from
pschaos.psnodes.wire.channels so that the twin follows them when they change). So a peer that
comes back is reached only at the channel's next attempt after it serves: up to 240 ms later
with psnodes' options once the peer was down for a second or more.

Without this the twin's primary reached a restarted replica at its sender's next 50 ms call,
and began its catch-up 33-62 ms after the replica's start where real primaries began it 103-207 ms
after (replica-restart-catchup, `pschaos sim validate` of 2026-12-07 19:34): the twin's catch-ups
carried 6.8% fewer bytes, the entries of the 100 ms it was early.
"""
from __future__ import annotations

import random
from typing import Callable

from pschaos.psnodes.wire.channels import channel_options

MULTIPLIER = 1.6      # gRPC core's reconnect backoff multiplier (not a channel option psnodes sets)
JITTER = 0.2          # gRPC core's: each pause drawn uniformly within +-20%


def _options() -> tuple[float, float]:
    opts = dict(channel_options(0))
    return (opts.get("grpc.initial_reconnect_backoff_ms", 1000) / 1000.0,
            opts.get("grpc.max_reconnect_backoff_ms", 120_000) / 1000.0)


class ReconnectBackoff:
    """One channel's connection state: connected (or never tried) or in backoff, with its next
    attempt. `refused(t)` is told when a call found the peer not serving; `connected(now,
    serving_since)` says whether a call made now reaches the peer (an attempt at or after the
    moment it began to serve has connected), advancing the attempts lazily."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.first_s, self.max_s = _options()
        self.next_at: float | None = None      # None: connected, or not yet refused
        self.pause = self.first_s

    def _draw(self, pause: float) -> float:
        return pause * (1.0 + self.rng.uniform(-JITTER, JITTER))

    def refused(self, t: float) -> None:
        """A connection attempt at `t` was refused: the channel waits a pause before the next."""
        if self.next_at is None:
            self.pause = self.first_s
            self.next_at = t + self._draw(self.pause)

    def connected(self, now: float, serving_since: Callable[[], float | None]) -> bool:
        """Whether the channel is connected at `now`. `serving_since()`: since when the peer has
        served without a break (None: it does not serve now)."""
        if self.next_at is None:
            return True
        since = serving_since()
        while self.next_at <= now:
            if since is not None and since <= self.next_at:
                self.next_at = None              # that attempt connected: the backoff starts over
                return True
            self.pause = min(self.pause * MULTIPLIER, self.max_s)
            self.next_at += self._draw(self.pause)
        return False


__all__ = ["ReconnectBackoff"]
