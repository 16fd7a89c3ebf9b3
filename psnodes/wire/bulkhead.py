"""The bulkhead of a node's RPC threads: calls that may wait do not take the last threads.

A node serves every call from one pool of `rpc_threads` threads. Push and Pull may wait there for
seconds: a sync push until every in-sync replica applied it, a BSP/SSP pull at its barrier (up to
10 s). Enough of them took every thread, and a replica's probe (Status with `probe`), the
primary's own Replicate answers and Migrate steps queued behind them: the probe went unanswered in
its wait and the replica replaced a live primary (detector review 2, M1). So at most
`rpc_threads - rpc_reserve` such calls run at once; one more is refused at once with UNAVAILABLE
(`Busy`), before it applied anything, and the client retries it as it retries a failover. The
other `rpc_reserve` threads are always there for the calls that never wait long.

Pulls may hold all but `push_floor` of those slots: a BSP/SSP barrier waits for a push, so a push
must always find a slot however many pulls wait at the barrier.

Refused, not queued: a call waiting for a slot would itself hold a pool thread, the very thing the
reserve keeps free.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from pschaos.psnodes.errors import Busy


def threads_problem(threads: int, reserve: int) -> str | None:
    """Why `rpc_threads`/`rpc_reserve` cannot keep the bulkhead's promises, or None: the reserve
    needs a thread, and the waiting calls need two slots, one a pull may take and one it never
    may (with a single slot, one barrier pull took it and the laggard's push was refused)."""
    if not 1 <= reserve <= threads - 2:
        return (f"rpc_reserve={reserve} must be at least 1 and leave at least 2 of rpc_threads={threads} for "
                "pushes and pulls: the reserve keeps threads for probes and Replicate, and a push must "
                "find a slot no barrier pull may take (e.g. rpc_threads: 32, rpc_reserve: 8)")
    return None


def push_floor(limit: int) -> int:
    """The waiting slots pulls may never take (a quarter, at least one): a BSP/SSP barrier is
    ended by the laggard's *push*, and with one shared limit the workers ahead, waiting in
    barrier pulls, took every slot and the laggard's push was refused until their pulls timed
    out (10 s a step from 25 workers a shard at the defaults: final review of issue 13, M2)."""
    return max(1, limit // 4)


#: the end of every Busy refusal's details: a client or the fuzzer can tell this UNAVAILABLE (the
#: call never reached the store) from a replication wait's (the push may apply late)
NOTHING_APPLIED = "nothing was applied, retry with the same request id"


def is_busy_refusal(details: str | None) -> bool:
    """Whether an UNAVAILABLE's details are a Busy refusal's (the call never reached the store)."""
    return (details or "").endswith(NOTHING_APPLIED)


class Bulkhead:
    """At most `limit` waiting calls at once, of which at most `limit - push_floor(limit)` pulls;
    `admit` refuses the next one (Busy)."""

    def __init__(self, name: str, limit: int, on_refuse: Callable[[str], None] = lambda method: None) -> None:
        self.name, self.limit, self.on_refuse = name, limit, on_refuse
        self.pull_limit = max(1, limit - push_floor(limit))
        self._slots = threading.BoundedSemaphore(limit)
        self._pulls = threading.BoundedSemaphore(self.pull_limit)

    def _busy(self, method: str, what: str) -> Busy:
        self.on_refuse(method)                 # counted: ps_busy_refusals{method}
        return Busy(f"{method}: {self.name} is serving {what} that may wait (rpc_threads - rpc_reserve); "
                    f"{NOTHING_APPLIED}")

    @contextmanager
    def admit(self, method: str, pull: bool = False) -> Iterator[None]:
        if pull and not self._pulls.acquire(blocking=False):
            raise self._busy(method, f"{self.pull_limit} pulls")
        if not self._slots.acquire(blocking=False):
            if pull:
                self._pulls.release()
            raise self._busy(method, f"{self.limit} calls")
        try:
            yield
        finally:
            self._slots.release()
            if pull:
                self._pulls.release()
