"""The bulkhead of a node's RPC threads: calls that may wait do not take the last threads.

A node serves every call from one pool of `rpc_threads` threads. Push and Pull may wait there for
seconds: a sync push until every in-sync replica applied it, a BSP/SSP pull at its barrier (up to
10 s). Enough of them took every thread, and a replica's probe (Status with `probe`), the
primary's own Replicate answers and Migrate steps queued behind them: the probe went unanswered in
its wait and the replica replaced a live primary (detector review 2, M1). So at most
`rpc_threads - rpc_reserve` such calls run at once; one more is refused at once with UNAVAILABLE
(`Busy`), before it applied anything, and the client retries it as it retries a failover. The
other `rpc_reserve` threads are always there for the calls that never wait long.

Refused, not queued: a call waiting for a slot would itself hold a pool thread, the very thing the
reserve keeps free.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from .errors import Busy


class Bulkhead:
    """At most `limit` waiting calls at once; `admit` refuses the next one (Busy)."""

    def __init__(self, name: str, limit: int) -> None:
        self.name, self.limit = name, limit
        self._slots = threading.BoundedSemaphore(limit)

    @contextmanager
    def admit(self, method: str) -> Iterator[None]:
        if not self._slots.acquire(blocking=False):
            raise Busy(f"{method}: {self.name} is serving {self.limit} calls that may wait (rpc_threads - "
                       "rpc_reserve); nothing was applied, retry with the same request id")
        try:
            yield
        finally:
            self._slots.release()
