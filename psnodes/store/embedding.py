"""One embedding table of a shard: rows by id, created on first push with a seeded initializer.

A pull of an id never seen returns the initializer's row without storing it, so reads change
nothing and every copy stores exactly the rows the update log created. The initializer is a
counter-based hash of (seed, table, id, column): any node computes the same row at any time.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from pschaos.psnodes.store.optimizers import OptimizerConfig, apply_update

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def init_rows(seed: int, table: str, ids: np.ndarray, dim: int) -> np.ndarray:
    """Deterministic rows uniform in [-1/sqrt(dim), 1/sqrt(dim)] (splitmix64 of the position)."""
    base = np.uint64((seed * 1_000_003 + zlib.crc32(table.encode())) & 0xFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        x = (ids.astype(np.uint64)[:, None] * np.uint64(dim) + np.arange(dim, dtype=np.uint64)[None, :]) + base
        x = x * np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        x = x ^ (x >> np.uint64(31))
    u = (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    return ((u * 2 - 1) / np.sqrt(dim)).astype(np.float32)


@dataclass
class RowStep:
    """The outcome of one push on a table, not yet stored: unique ids and their new rows, slots, steps."""

    ids: np.ndarray
    rows: np.ndarray
    slots: dict[str, np.ndarray]
    steps: np.ndarray


class EmbeddingTable:
    def __init__(self, name: str, dim: int, cfg: OptimizerConfig, seed: int) -> None:
        self.name, self.dim, self.cfg, self.seed = name, dim, cfg, seed
        self.index: dict[int, int] = {}
        self.n = 0
        cap = 64
        self.ids = np.zeros(cap, dtype=np.int64)
        self.rows = np.zeros((cap, dim), dtype=np.float32)
        self.steps = np.zeros(cap, dtype=np.int64)
        self.mod = np.zeros(cap, dtype=np.int64)
        self.slots = {s: np.zeros((cap, dim), dtype=np.float32) for s in cfg.slot_names()}

    def _grow(self, need: int) -> None:
        cap = len(self.ids)
        if need <= cap:
            return
        while cap < need:
            cap *= 2
        def widen(a: np.ndarray) -> np.ndarray:
            b = np.zeros((cap,) + a.shape[1:], dtype=a.dtype)
            b[: self.n] = a[: self.n]
            return b
        self.ids, self.rows, self.steps, self.mod = map(widen, (self.ids, self.rows, self.steps, self.mod))
        self.slots = {k: widen(v) for k, v in self.slots.items()}

    def _positions(self, ids: np.ndarray, create: bool) -> np.ndarray:
        """Row positions of `ids` (-1 for unknown ones unless `create`)."""
        get = self.index.get
        pos = np.fromiter((get(int(i), -1) for i in ids), dtype=np.int64, count=ids.size)
        if create and (pos < 0).any():
            new = np.unique(ids[pos < 0])
            self._grow(self.n + new.size)
            at = np.arange(self.n, self.n + new.size)
            self.ids[at] = new
            self.rows[at] = init_rows(self.seed, self.name, new, self.dim)
            for k, v in self.cfg.new_slots((new.size, self.dim)).items():
                self.slots[k][at] = v
            self.steps[at] = 0
            for i, p in zip(new.tolist(), at.tolist()):
                self.index[i] = p
            self.n += new.size
            pos = np.fromiter((self.index[int(i)] for i in ids), dtype=np.int64, count=ids.size)
        return pos

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Current rows for `ids`; unseen ids read as their initializer rows."""
        pos = self._positions(ids, create=False)
        out = np.empty((ids.size, self.dim), dtype=np.float32)
        hit = pos >= 0
        out[hit] = self.rows[pos[hit]]
        if (~hit).any():
            out[~hit] = init_rows(self.seed, self.name, ids[~hit], self.dim)
        return out

    def prepare(self, ids: np.ndarray, grads: np.ndarray) -> "RowStep":
        """The rows and optimizer state a push would leave, computed aside: the table is untouched,
        so the store can refuse the push (a non-finite result) without a trace. Repeated ids in one
        push are summed first (one optimizer step per row); unseen ids start from their initializer."""
        uniq, inv = np.unique(ids, return_inverse=True)
        g = np.zeros((uniq.size, self.dim), dtype=np.float32)
        np.add.at(g, inv, grads)
        pos = self._positions(uniq, create=False)
        hit = pos >= 0
        rows = np.empty((uniq.size, self.dim), dtype=np.float32)
        rows[hit] = self.rows[pos[hit]]
        steps = np.zeros(uniq.size, dtype=np.int64)
        steps[hit] = self.steps[pos[hit]]
        steps += 1
        fresh = self.cfg.new_slots((int((~hit).sum()), self.dim))
        slots = {}
        for k, v in self.slots.items():
            slots[k] = np.empty((uniq.size, self.dim), dtype=np.float32)
            slots[k][hit] = v[pos[hit]]
            slots[k][~hit] = fresh[k]
        if (~hit).any():
            rows[~hit] = init_rows(self.seed, self.name, uniq[~hit], self.dim)
        apply_update(self.cfg, rows, g, slots, steps[:, None])
        return RowStep(uniq, rows, slots, steps)

    def finite(self, step: "RowStep") -> bool:
        return bool(np.isfinite(step.rows).all() and all(np.isfinite(v).all() for v in step.slots.values()))

    def commit(self, step: "RowStep", seq: int) -> None:
        """Store a prepared step as the change of `seq`."""
        if step.ids.size == 0:
            return
        pos = self._positions(step.ids, create=True)
        self.rows[pos] = step.rows
        self.steps[pos] = step.steps
        for k, v in step.slots.items():
            self.slots[k][pos] = v
        self.mod[pos] = seq

    def push(self, ids: np.ndarray, grads: np.ndarray, seq: int) -> None:
        """Apply gradients as the change of `seq` (prepare, then commit)."""
        self.commit(self.prepare(ids, grads), seq)

    def nbytes(self) -> int:
        return self.n * (self.dim * 4 * (1 + len(self.slots)) + 24)

    def digest(self, h) -> None:
        order = np.argsort(self.ids[: self.n], kind="stable")
        h.update(self.name.encode())
        h.update(self.ids[: self.n][order].tobytes())
        h.update(self.rows[: self.n][order].tobytes())
        h.update(self.steps[: self.n][order].tobytes())
        for k in sorted(self.slots):
            h.update(self.slots[k][: self.n][order].tobytes())

    def arrays(self, prefix: str, since: int = 0) -> dict[str, np.ndarray]:
        """The rows changed after `since`, with their optimizer state, as named arrays."""
        sel = np.nonzero(self.mod[: self.n] > since)[0]
        out = {f"{prefix}ids": self.ids[sel], f"{prefix}rows": self.rows[sel],
               f"{prefix}steps": self.steps[sel], f"{prefix}mod": self.mod[sel]}
        out.update({f"{prefix}slot/{k}": v[sel] for k, v in self.slots.items()})
        return out

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the rows where `mask` (over the first n rows) is true: the rows a shard still
        owns after its keys moved away (psnodes/store/moving.py)."""
        sel = np.nonzero(mask)[0]
        self.ids[: sel.size] = self.ids[sel]
        self.rows[: sel.size] = self.rows[sel]
        self.steps[: sel.size] = self.steps[sel]
        self.mod[: sel.size] = self.mod[sel]
        for v in self.slots.values():
            v[: sel.size] = v[sel]
        self.n = int(sel.size)
        self.index = {int(i): p for p, i in enumerate(self.ids[: self.n].tolist())}

    def merge(self, arrays: dict[str, np.ndarray], prefix: str) -> None:
        """Overwrite (or create) the rows of an `arrays` export."""
        ids = arrays[f"{prefix}ids"]
        if ids.size == 0:
            return
        pos = self._positions(ids, create=True)
        self.rows[pos] = arrays[f"{prefix}rows"]
        self.steps[pos] = arrays[f"{prefix}steps"]
        self.mod[pos] = arrays[f"{prefix}mod"]
        for k in self.slots:
            self.slots[k][pos] = arrays[f"{prefix}slot/{k}"]
