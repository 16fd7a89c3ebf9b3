"""The set of idempotency keys (worker#incarnation, request id) a shard has applied.

It makes retried pushes exactly-once across failovers: it is part of the replicated state, so
a promoted replica knows every key its old primary acked. The key names the worker *process*
(`idem_key`): a restarted worker starts its request ids at 1 again, and under its bare name its
new pushes would be taken for retries of old ones and silently dropped. Each client counts
request ids per shard, so a shard sees 1, 2, 3, ... from each incarnation and the set is one
merged interval per incarnation (a few more after pushes whose outcome was unknown). The seq of
recent keys is kept so a retry gets the same answer as the original.
"""
from __future__ import annotations

import bisect
from collections import OrderedDict


def idem_key(worker: str, incarnation: int) -> str:
    """The applied-set key of one worker process: `worker-0#1712345678901234`."""
    return f"{worker}#{incarnation}"


class AppliedSet:
    def __init__(self, recent_capacity: int = 65536) -> None:
        self.ranges: dict[str, list[list[int]]] = {}
        self.recent: OrderedDict[tuple[str, int], int] = OrderedDict()
        self.recent_capacity = recent_capacity

    def contains(self, key: str, req_id: int) -> bool:
        rs = self.ranges.get(key)
        if not rs:
            return False
        i = bisect.bisect_right(rs, [req_id, float("inf")]) - 1
        return i >= 0 and rs[i][0] <= req_id <= rs[i][1]

    def seq_of(self, key: str, req_id: int) -> int:
        """The seq that applied the key, or 0 when it is older than the recent window."""
        return self.recent.get((key, req_id), 0)

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
        self.recent[(key, req_id)] = seq
        if len(self.recent) > self.recent_capacity:
            self.recent.popitem(last=False)

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

    def count(self) -> int:
        return sum(hi - lo + 1 for rs in self.ranges.values() for lo, hi in rs)

    def to_json(self, since: int = 0) -> dict:
        """All ranges, and the recent seqs applied after `since` (what a delta must carry)."""
        return {"ranges": self.ranges,
                "recent": [[w, r, s] for (w, r), s in self.recent.items() if s > since]}

    def merge_json(self, d: dict) -> None:
        """Take the ranges of a newer copy and add its recent seqs."""
        self.ranges = {w: [list(x) for x in rs] for w, rs in d.get("ranges", {}).items()}
        for w, r, s in d.get("recent", []):
            self.recent[(w, r)] = s
        while len(self.recent) > self.recent_capacity:
            self.recent.popitem(last=False)
