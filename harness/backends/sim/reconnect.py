"""gRPC's reconnect backoff on one channel, in virtual time.

A real channel that loses its connection (the peer died, or stopped) goes idle: no backoff yet,
and its next call tries to connect. If that attempt is refused (the peer is down or still
starting, or the link refuses connections: a disabled proxy), the channel sits in
TRANSIENT_FAILURE, fails every call at once (UNAVAILABLE, nothing on the wire), and tries again
on a timer: the first pause `grpc.initial_reconnect_backoff_ms`, each next one 1.6x longer up to
`grpc.max_reconnect_backoff_ms`, each drawn within +-20%. gRPC core clamps both to at least
100 ms (subchannel.cc, ParseArgsForBackoffValues), so psnodes' 20 and 200 ms give pauses of
100, 160, 200, 200... ms (the bounds are read from pschaos.psnodes.wire.channels, so the twin
follows them when they change). An attempt connects if the peer serves and the link lets it
through at that moment; the channel is then connected until a call fails on it again. So a
peer that comes back is reached only at the channel's next attempt after it serves: up to
240 ms later.

Without this the twin's primary reached a restarted replica at its sender's next 50 ms call,
and began its catch-up 33-62 ms after the replica's start where real primaries began it 103-207
ms after (replica-restart-catchup, `pschaos sim validate` of 2026-12-07 19:34).
"""
from __future__ import annotations

import random
from typing import Callable

import simpy

from pschaos.psnodes.wire.channels import channel_options

MULTIPLIER = 1.6      # gRPC core's reconnect backoff multiplier (not a channel option psnodes sets)
JITTER = 0.2          # gRPC core's: each pause drawn uniformly within +-20%
FLOOR_S = 0.1         # gRPC core's floor under both bounds (ParseArgsForBackoffValues)


def pauses() -> tuple[float, float]:
    """The first and the longest pause, as gRPC core takes psnodes' channel options."""
    opts = dict(channel_options(0))
    return (max(FLOOR_S, opts.get("grpc.initial_reconnect_backoff_ms", 1000) / 1000.0),
            max(FLOOR_S, opts.get("grpc.max_reconnect_backoff_ms", 120_000) / 1000.0))


class ReconnectBackoff:
    """One channel: `usable()` says whether a call goes on the wire now (connected, or idle: the
    call is itself the attempt), `ok()` that a call was answered (connected), `failed(refused)`
    that one failed: on a connected channel it only goes idle; on an idle one a refusal starts
    the attempts, a SimPy process of their own that ends when one finds `reachable()`.
    `close()` stops them (the sender is gone)."""

    def __init__(self, env: simpy.Environment, rng: random.Random, reachable: Callable[[], bool]) -> None:
        self.env, self.rng, self.reachable = env, rng, reachable
        self.first_s, self.max_s = pauses()
        self.ready = False                       # connected: a call failing on it leaves it idle
        self.retrying: simpy.Process | None = None

    def usable(self) -> bool:
        return self.retrying is None

    def ok(self) -> None:
        self.ready = True

    def failed(self, refused: bool) -> None:
        if self.ready:
            self.ready = False                   # a lost connection: idle, the next call tries again
        elif refused and self.retrying is None:
            self.retrying = self.env.process(self._attempts())

    def _attempts(self):
        pause = self.first_s
        try:
            while True:
                yield self.env.timeout(pause * (1.0 + self.rng.uniform(-JITTER, JITTER)))
                if self.reachable():
                    self.ready = True
                    break
                pause = min(pause * MULTIPLIER, self.max_s)
        except simpy.Interrupt:
            pass
        self.retrying = None

    def close(self) -> None:
        if self.retrying is not None and self.retrying.is_alive:
            self.retrying.interrupt("closed")


__all__ = ["ReconnectBackoff", "pauses"]
