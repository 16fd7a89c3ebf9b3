"""Key placement: which shard holds a dense tensor or an embedding row.

Hashes are stable across processes and machines (never Python's salted `hash`), so every
worker and node agrees on placement from the shard count alone.
"""
from __future__ import annotations

import zlib

import numpy as np

_MIX = np.uint64(0x9E3779B97F4A7C15)

#: Audit tensors (the harness's independent oracle) are named `__audit__/<shard>` and live on
#: that shard: one float32 slot per worker, counting the pushes of `worker-<j>` in slot j.
AUDIT_PREFIX = "__audit__/"
AUDIT_SLOTS = 256


def audit_name(shard: int) -> str:
    return f"{AUDIT_PREFIX}{shard}"


def is_audit(name: str) -> bool:
    return name.startswith(AUDIT_PREFIX)


def dense_shard(name: str, num_shards: int) -> int:
    """Shard of a dense tensor, by CRC32 of its name; `__audit__/<s>` is pinned to shard s."""
    rest = name[len(AUDIT_PREFIX):]
    if is_audit(name) and rest.isascii() and rest.isdigit():
        return int(rest) % num_shards
    return zlib.crc32(name.encode()) % num_shards


def row_shards(table: str, ids: np.ndarray, num_shards: int) -> np.ndarray:
    """Shard of each embedding id: a multiplicative hash of the id mixed with the table name."""
    salt = np.uint64(zlib.crc32(table.encode()))
    with np.errstate(over="ignore"):
        h = (ids.astype(np.uint64) ^ salt) * _MIX
    return ((h >> np.uint64(33)) % np.uint64(num_shards)).astype(np.int64)


def node_name(shard: int, slot: int) -> str:
    """The name of replica slot `slot` of shard `shard`, as faults and reports use it."""
    return f"shard-{shard}/{slot}"


def parse_node_name(name: str) -> tuple[int, int]:
    """Inverse of `node_name`; raises ValueError naming the expected form."""
    try:
        kind, rest = name.split("-", 1)
        shard, slot = rest.split("/")
        if kind != "shard":
            raise ValueError
        return int(shard), int(slot)
    except ValueError:
        raise ValueError(f"node name {name!r} is not of the form shard-<i>/<r>") from None
