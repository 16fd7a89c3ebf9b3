"""What a copy holds, sorted by who owns it: the evidence for the harness's `ownership-exact` check.

Copies are compared with each other by checksum elsewhere; that finds a copy that differs from
its peers, never one whose peers are wrong with it, nor a key that stayed behind on every copy of
a shard after it moved. So a copy reports its key set against a shard set the *caller* names
(the routing record as the harness read it, never the copy's own routing, which would make the
judgment a tautology):

- `dense`: the name of every dense tensor it holds (a few dozen names; the harness tells which
  ones belong elsewhere, and which owned names are missing, from placement and the history);
- `rows`: per embedding table, per owning shard under `under`, the count of rows it holds and an
  order-free hash of their ids (a sum of 64-bit mixes, mod 2^64). Ids alone would be tens of
  thousands of integers a copy; the count says whether rows of another shard stayed, and the
  hash whether two copies of one shard hold the same owned rows.

Pure: both shells (the node's Status, the twin's copy) call it on their store.
"""
from __future__ import annotations

import zlib
from typing import Iterable

import numpy as np

from pschaos.psnodes.placement import row_owners

_SALT = np.uint64(0xD6E8FEB86659FD93)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def id_set_hash(table: str, ids: np.ndarray) -> str:
    """An order-free hash of a set of row ids of `table` (hex, 16 digits): equal sets, equal hashes;
    a set with one id more or less differs but for a 2^-64 chance."""
    if ids.size == 0:
        return "0" * 16
    with np.errstate(over="ignore"):
        x = (np.asarray(ids).astype(np.uint64) ^ np.uint64(zlib.crc32(table.encode()))) * _SALT
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        x = x ^ (x >> np.uint64(31))
        return f"{int(np.sum(x, dtype=np.uint64)):016x}"


def holdings(dense: Iterable[str], tables: dict, under: Iterable[int]) -> dict:
    """The holdings of one copy: its dense names, and its rows per table and owner under `under`.

    `tables` maps a table name to its EmbeddingTable (ids in `ids[:n]`)."""
    shards = tuple(sorted(int(s) for s in under))
    rows: dict[str, dict[str, list]] = {}
    for name, t in sorted(tables.items()):
        ids = np.asarray(t.ids[: t.n])
        per: dict[str, list] = {}
        if ids.size and shards:
            own = row_owners(name, ids, shards)
            for o in np.unique(own):
                sel = ids[own == o]
                per[str(int(o))] = [int(sel.size), id_set_hash(name, sel)]
        elif ids.size:
            per["none"] = [int(ids.size), id_set_hash(name, ids)]
        rows[name] = per
    return {"under": list(shards), "dense": sorted(dense), "rows": rows}
