"""What a pull reads of a shard: dense tensors changed since a seq, embedding rows, audit counts.

A pull is checked against the limits (`check_pull`) before the node takes its lock, so that no
pull holds the shard long. Nothing here changes the state. A part of ShardStore (store.py),
over ShardState's fields.
"""
from __future__ import annotations

import numpy as np

from pschaos.psnodes.store import holdings as held, moving
from pschaos.psnodes.store.state import ShardState
from pschaos.psnodes.wire.codec import ids_from_pb
from pschaos.psnodes.errors import InvalidArgument, NotFound, TooLarge
from pschaos.psnodes.placement import audit_name
from pschaos.psnodes.proto import ps_pb2


class ShardReads(ShardState):
    """A part of ShardStore: the reads a pull and a status call make."""

    def pull_dense(self, since: int, names: list[str]) -> list[tuple[str, np.ndarray]]:
        """Dense tensors changed after `since` (all of them when since == 0).

        The arrays are the live ones, not copies: encode them before the next update applies."""
        wanted = names or sorted(n for n in self.dense if moving.owns(self, n))
        out = []
        for n in wanted:
            if n not in self.dense:
                raise NotFound(f"names: dense {n[:80]!r} is not on shard {self.spec.shard}")
            if self.dense_mod[n] > since:
                out.append((n, self.dense[n]))
        size = sum(a.nbytes for _, a in out)
        if size > self.spec.max_reply_bytes:
            raise TooLarge(f"the pull would return {size} bytes, above the {self.spec.max_reply_bytes}-byte message "
                           "limit; pull by names, a few at a time")
        return out

    def check_pull(self, req: ps_pb2.PullRequest) -> list[np.ndarray]:
        """Check a pull before it takes the lock (its cost is bounded by the limits, so no pull holds
        the shard long enough for replicas to suspect the primary); returns the ids per Rows."""
        lim = self.spec.limits
        if len(req.names) > lim.max_tensors:
            raise TooLarge(f"names holds {len(req.names)} names; at most limits.max_tensors={lim.max_tensors}")
        if len(set(req.names)) != len(req.names):
            raise InvalidArgument("names repeats a name; ask for each dense tensor once")
        for i, n in enumerate(req.names):
            if len(n.encode()) > lim.max_name_bytes:
                raise InvalidArgument(f"names[{i}] is longer than limits.max_name_bytes={lim.max_name_bytes}")
        if sum(len(r.ids) // 8 for r in req.sparse) > lim.max_ids:
            raise TooLarge(f"sparse holds more than limits.max_ids={lim.max_ids} ids in all; split the pull")
        out = []
        for r in req.sparse:
            if r.table not in self.tables:
                known = ", ".join(sorted(self.tables)) or "none"
                raise InvalidArgument(f"sparse[{r.table[:80]!r}]: unknown table; known tables: {known}")
            out.append(ids_from_pb(r, limits=lim))
        return out

    def pull_rows(self, table: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Current rows of checked `ids` (see check_pull)."""
        t = self.tables[table]
        return ids, t.lookup(ids), t.dim

    def audit_counts(self) -> dict[str, int] | None:
        """{"worker-<j>": pushes of worker j applied here} for the nonzero slots of this shard's
        audit tensor; None when this copy has no audit tensor."""
        a = self.dense.get(audit_name(self.spec.shard))
        if a is None:
            return None
        return {f"worker-{j}": int(round(float(a.flat[j]))) for j in np.flatnonzero(a).tolist()}

    def holdings(self, under: list[int]) -> dict:
        """The keys and rows this copy holds, sorted by owner under `under` (empty: its own
        routing): the evidence of the harness's ownership-exact check (psnodes/store/holdings.py)."""
        return held.holdings(self.dense, self.tables, under or self.shards, moving.key_digests(self, self.dense))
