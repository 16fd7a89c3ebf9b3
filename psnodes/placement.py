"""Key placement: which shard holds a dense tensor or an embedding row, for a given set of shards.

Placement is rendezvous (highest-random-weight) hashing: a key goes to the shard whose weight
`h(key, shard)` is highest. Adding a shard moves exactly the keys whose new highest weight is the
new shard (1/(n+1) of them in expectation, the optimum), and removing one moves only its own keys;
no ring, no virtual nodes to tune, nothing to store but the shard set (docs/internals/elastic-shards.md has
the choice and the measured fractions). Hashes are stable across processes and machines (never
Python's salted `hash`), so every worker and node agrees on placement from the shard set alone;
`dense_shard(name, n)` is placement over shards 0..n-1, the static cluster's.

Audit tensors (the harness's independent oracle) come in two kinds. `__audit__/<s>` is pinned to
shard s: one float32 slot per worker counting the pushes of `worker-<j>` that shard s applied; it
never moves. `__audit__/m<b>` (the migrating buckets, b < AUDIT_BUCKETS) are placed like any
dense name, so they move with migrations: every push carries +1 on each bucket its shard owns,
and a bucket's count on its final owner shows that every acknowledged push it carried survived
every move (harness/checkers/acks.py).
"""
from __future__ import annotations

import hashlib
import zlib
from functools import lru_cache
from typing import Iterable, Sequence

import numpy as np

_MIX = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

#: Audit tensors (the harness's independent oracle) are named `__audit__/<shard>` and live on
#: that shard: one float32 slot per worker, counting the pushes of `worker-<j>` in slot j.
AUDIT_PREFIX = "__audit__/"
AUDIT_SLOTS = 256
#: migrating audit buckets `__audit__/m<b>`: placed like any dense name, so they move with keys
AUDIT_BUCKETS = 24
BUCKET_PREFIX = AUDIT_PREFIX + "m"


def audit_name(shard: int) -> str:
    return f"{AUDIT_PREFIX}{shard}"


def bucket_name(b: int) -> str:
    return f"{BUCKET_PREFIX}{b}"


def bucket_names() -> list[str]:
    return [bucket_name(b) for b in range(AUDIT_BUCKETS)]


def is_audit(name: str) -> bool:
    return name.startswith(AUDIT_PREFIX)


@lru_cache(maxsize=65536)
def pinned_shard(name: str) -> int | None:
    """The shard a pinned audit tensor `__audit__/<s>` belongs to; None for any other name."""
    rest = name[len(AUDIT_PREFIX):]
    if is_audit(name) and rest.isascii() and rest.isdigit():
        return int(rest)
    return None


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer: every input bit moves every output bit (uint64 in, uint64 out)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def _weights(key_hash: np.ndarray, shards: Sequence[int]) -> np.ndarray:
    """Rendezvous weights, [len(keys), len(shards)]: a 64-bit mix of (key hash, shard id)."""
    s = np.asarray(list(shards), dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = key_hash.astype(np.uint64)[:, None] ^ ((s[None, :] + np.uint64(1)) * _MIX)
    return _mix64(_mix64(x))


def _pick(key_hash: np.ndarray, shards: Sequence[int]) -> np.ndarray:
    shards = list(shards)
    if not shards:
        raise ValueError("placement over an empty shard set")
    return np.asarray(shards, dtype=np.int64)[np.argmax(_weights(key_hash, shards), axis=1)]


def owner(name: str, shards: Iterable[int]) -> int:
    """The shard of a dense tensor among `shards`; `__audit__/<s>` is pinned to shard s."""
    return _owner(name, tuple(sorted(shards)))


@lru_cache(maxsize=1 << 17)
def _owner(name: str, shards: tuple[int, ...]) -> int:
    """`owner` on a sorted shard tuple, remembered: a store asks it for every tensor of every
    push, pull and validation (135,000 times in one twin run of kill-primary, a third of its
    wall time), and the answer depends on the name and the shard set alone."""
    pin = pinned_shard(name)
    if pin is not None:
        return pin if pin in shards else int(shards[pin % len(shards)])   # a plain int, whoever asks next
    return int(_pick(_name_hash(name), shards)[0])


@lru_cache(maxsize=65536)
def _name_hash(name: str) -> np.ndarray:
    """64 bits of BLAKE2b of the name (CRC-32 halves were measurably correlated: 2000 layer names
    moved 27.7% on 3 -> 4 shards, against the optimum 25%)."""
    h = np.array([int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")],
                 dtype=np.uint64)
    h.flags.writeable = False           # remembered and shared: no caller may change it
    return h


def row_owners(table: str, ids: np.ndarray, shards: Iterable[int]) -> np.ndarray:
    """The shard of each embedding id among `shards`: the id's hash, salted by the table name."""
    salt = np.uint64(zlib.crc32(table.encode()))
    with np.errstate(over="ignore"):
        h = _mix64((np.asarray(ids).astype(np.uint64) ^ salt) * _MIX)
    return _pick(h, sorted(shards)) if h.size else np.zeros(0, dtype=np.int64)


def dense_shard(name: str, num_shards: int) -> int:
    """Shard of a dense tensor in a static cluster of shards 0..num_shards-1."""
    return owner(name, range(num_shards))


def row_shards(table: str, ids: np.ndarray, num_shards: int) -> np.ndarray:
    """Shard of each embedding id in a static cluster of shards 0..num_shards-1."""
    return row_owners(table, ids, range(num_shards))


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
