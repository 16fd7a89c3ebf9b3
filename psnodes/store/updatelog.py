"""The bounded update log: recent deltas by sequence number, for replication and catch-up.

Each entry keeps its epoch so that a follower's position can be matched against the primary's
log (as in Raft's log matching): same seq and same epoch means the same history up to there.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    seq: int
    epoch: int
    payload: bytes


class UpdateLog:
    def __init__(self, max_entries: int = 4096, max_bytes: int = 256 << 20) -> None:
        self.entries: deque[Entry] = deque()
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self.base_seq = 0      # seq just before the first entry kept
        self.base_epoch = 0    # epoch of the entry at base_seq

    def append(self, e: Entry) -> None:
        self.entries.append(e)
        self.bytes += len(e.payload)
        while self.entries and (len(self.entries) > self.max_entries or self.bytes > self.max_bytes):
            old = self.entries.popleft()
            self.bytes -= len(old.payload)
            self.base_seq, self.base_epoch = old.seq, old.epoch

    def reset(self, seq: int, epoch: int) -> None:
        """Forget everything: the state was replaced by a snapshot taken at `seq`."""
        self.entries.clear()
        self.bytes = 0
        self.base_seq, self.base_epoch = seq, epoch

    @property
    def last_seq(self) -> int:
        return self.entries[-1].seq if self.entries else self.base_seq

    def epoch_at(self, seq: int) -> int | None:
        """Epoch of the entry at `seq`, or None when the log does not reach it."""
        if seq == self.base_seq:
            return self.base_epoch
        if not self.entries or seq < self.entries[0].seq or seq > self.last_seq:
            return None
        return self.entries[seq - self.entries[0].seq].epoch

    def since(self, seq: int, max_bytes: int = 1 << 62) -> list[Entry] | None:
        """Entries after `seq` (up to about max_bytes), or None when the log no longer reaches back."""
        if seq < self.base_seq:
            return None
        if seq >= self.last_seq:
            return []
        out: list[Entry] = []
        total = 0
        start = seq + 1 - self.entries[0].seq
        for i in range(start, len(self.entries)):
            e = self.entries[i]
            if out and total + len(e.payload) > max_bytes:
                break
            out.append(e)
            total += len(e.payload)
        return out
