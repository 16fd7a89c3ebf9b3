"""The set of idempotency keys (worker#incarnation, request id) a shard has applied.

It makes retried pushes exactly-once across failovers: it is part of the replicated state, so
a promoted replica knows every key its old primary acked. The key names the worker *process*
(`idem_key`): a restarted worker starts its request ids at 1 again, and under its bare name its
new pushes would be taken for retries of old ones and silently dropped. Each client counts
request ids per shard, so a shard sees 1, 2, 3, ... from each incarnation and the set is one
merged interval per incarnation (a few more after pushes whose outcome was unknown). The seq of
each process's last few keys is kept so a retry gets the same answer as the original: a client
has at most one push in flight per shard, so only the newest keys of a process can come back as
retries, and a window per key keeps that record (and every delta and checkpoint that carries
it) bounded however long the run.
"""
from __future__ import annotations

import bisect
from collections import OrderedDict


def idem_key(worker: str, incarnation: int) -> str:
    """The applied-set key of one worker process: `worker-0#1712345678901234`."""
    return f"{worker}#{incarnation}"


class AppliedSet:
    def __init__(self, recent_capacity: int = 16) -> None:
        self.ranges: dict[str, list[list[int]]] = {}
        self.recent: dict[str, OrderedDict[int, int]] = {}   # key -> req_id -> seq, newest last
        self.recent_capacity = recent_capacity                # per key

    def contains(self, key: str, req_id: int) -> bool:
        rs = self.ranges.get(key)
        if not rs:
            return False
        i = bisect.bisect_right(rs, [req_id, float("inf")]) - 1
        return i >= 0 and rs[i][0] <= req_id <= rs[i][1]

    def seq_of(self, key: str, req_id: int) -> int:
        """The seq that applied the key, or 0 when it is older than the recent window."""
        w = self.recent.get(key)
        return w.get(req_id, 0) if w else 0

    def add(self, key: str, req_id: int, seq: int) -> None:
        rs = self.ranges.setdefault(key, [])
        if rs and rs[-1][1] + 1 == req_id:
            rs[-1][1] = req_id
        elif not rs or rs[-1][1] < req_id:
            rs.append([req_id, req_id])
        else:
            i = bisect.bisect_right(rs, [req_id, float("inf")])
            rs.insert(i, [req_id, req_id])
            self._merge(rs, max(i - 1, 0))
        self._remember(key, req_id, seq)

    def _remember(self, key: str, req_id: int, seq: int) -> None:
        w = self.recent.setdefault(key, OrderedDict())
        w[req_id] = seq
        while len(w) > self.recent_capacity:
            w.popitem(last=False)

    @staticmethod
    def _merge(rs: list[list[int]], start: int) -> None:
        j = start
        while j + 1 < len(rs):
            if rs[j][1] + 1 >= rs[j + 1][0]:
                rs[j][1] = max(rs[j][1], rs[j + 1][1])
                del rs[j + 1]
            elif j > start:
                break
            else:
                j += 1

    def intervals(self) -> int:
        """How many intervals the set holds (one per worker process per shard when all is well)."""
        return sum(len(rs) for rs in self.ranges.values())

    def count(self) -> int:
        return sum(hi - lo + 1 for rs in self.ranges.values() for lo, hi in rs)

    def to_json(self, since: int = 0) -> dict:
        """All ranges, and the recent seqs applied after `since` (what a delta must carry):
        {"ranges": {key: [[lo, hi], ...]}, "recent": {key: [[req_id, seq], ...]}}."""
        recent = {k: [[r, s] for r, s in w.items() if s > since] for k, w in self.recent.items()}
        return {"ranges": self.ranges, "recent": {k: v for k, v in recent.items() if v}}

    def merge_json(self, d: dict) -> None:
        """Take the ranges of a newer copy and add its recent seqs."""
        self.ranges = {w: [list(x) for x in rs] for w, rs in d.get("ranges", {}).items()}
        recent = d.get("recent", {})
        if isinstance(recent, list):        # the older flat form [[key, req_id, seq], ...]
            flat, recent = recent, {}
            for k, r, s in flat:
                recent.setdefault(k, []).append([r, s])
        for k, pairs in recent.items():
            for r, s in pairs:
                self._remember(k, int(r), int(s))
