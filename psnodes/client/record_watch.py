"""One shared reader of shard records for every call of a PS client (the deposed-primary watch).

A call waiting on a primary past the detector's floor looks at its shard record now and then
(psnodes/client/shard_calls.py `_call_primary`): a frozen primary is given up once the record names its
successor. One read per waiting call would load etcd with every call in flight (a push and a pull
per shard per worker, and every BSP/SSP barrier pull the server holds for seconds), at the very
moment the replicas' election needs etcd. So the reads are shared: per client (one per worker
process) and shard, a read is made only when the last one began at least `period` ago and none is
in flight; every other waiting call takes what the last read found. However many calls wait,
a shard's record is read at most once per `period` (DEPOSED_CHECK_S) per process.

A read that fails (etcd away or slow) is no news: the calls keep waiting (their deadlines still
bound them) and the next read is allowed after a doubling backoff, capped at BACKOFF_CAP_S, so
a control plane that is down is not hammered and one lost read does not end the watch. No thread
and no clock of its own: the waiting calls drive it with the client's Runtime clock.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.errors import PSError

BACKOFF_CAP_S = 0.4       # after failed reads, the longest pause before the next one
_EPS = 1e-6               # a wait of exactly `period` counts as `period` (float sums)


@dataclass(frozen=True)
class Look:
    """What the last read of one shard's record found."""

    record: ShardRecord | None      # None: no record (or `failed`)
    routed: bool | None = None      # no record: whether the routing record still names the shard (None: unknown)
    failed: bool = False            # the read did not answer: no news


class RecordWatch:
    """The shared reads. `read(shard)` returns (record or None, routed) and raises PSError when
    etcd does not answer; it is called outside the lock, by one waiting call at a time per shard."""

    def __init__(self, read: Callable[[int], tuple[ShardRecord | None, bool | None]],
                 clock: Callable[[], float]) -> None:
        self._read, self._clock = read, clock
        self._lock = threading.Lock()
        self._last: dict[int, Look] = {}
        self._began: dict[int, float] = {}       # shard -> when its last read began
        self._backoff: dict[int, float] = {}     # shard -> pause before the next read after failures
        self._reading: set[int] = set()
        self.reads = 0                           # reads made (shard records, and routing on a missing one)

    def look(self, shard: int, period: float) -> Look | None:
        """The freshest news of `shard`'s record: read now if the last read began `period` ago or
        more (or the backoff after failures has passed) and no other call is reading it; else what
        the last read found (None: nothing read yet)."""
        now = self._clock()
        with self._lock:
            began = self._began.get(shard)
            gap = max(period, self._backoff.get(shard, 0.0))
            if shard in self._reading or (began is not None and now < began + gap - _EPS):
                return self._last.get(shard)
            self._reading.add(shard)
            self._began[shard] = now
        try:
            record, routed = self._read(shard)
            look, backoff = Look(record, routed), 0.0
        except PSError:
            prev = self._backoff.get(shard, 0.0)
            look, backoff = Look(None, failed=True), min(BACKOFF_CAP_S, max(period, prev) * 2)
        except BaseException:
            with self._lock:
                self._reading.discard(shard)
            raise
        with self._lock:
            self._last[shard], self._backoff[shard] = look, backoff
            self._reading.discard(shard)
        return look

    def count(self, n: int = 1) -> None:
        """`read` made `n` etcd reads (it says so itself: a missing record costs a routing read too)."""
        with self._lock:
            self.reads += n


__all__ = ["BACKOFF_CAP_S", "Look", "RecordWatch"]
