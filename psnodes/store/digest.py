"""A cheap digest of a shard's dense parameters, computed the same way by the server and the client.

A delta pull returns only the tensors changed after the client's cursor; the client's copy of the
shard is its earlier copy with those tensors replaced. That copy is right only if the cursor names
a point of the history the server holds now: a cursor carried across a failover (async
replication loses an unreplicated tail) names a window the new primary never had, and the delta
silently misses what differs. The server therefore puts in each delta reply a digest of its whole
dense state at the reply's version (under the lock that builds the reply), the client computes the
same digest over its assembled copy, and the harness compares the two (check pulled-copy-matches):
the outcome is judged, not the cursor, so a carried cursor that happens to be right passes.

CRC-32 is enough: it guards against an honest mistake, not an adversary, and costs microseconds
for these models (a few thousand floats per shard).
"""
from __future__ import annotations

import zlib
from typing import Mapping

import numpy as np

from pschaos.psnodes.proto import ps_pb2


def dense_digest(dense: Mapping[str, np.ndarray]) -> int:
    """CRC-32 over every tensor in name order: its name, its shape and its float32 bytes.

    The shape is in the digest so a scalar () and a (1,) holding the same value differ; a tensor
    that is not float32 is converted first (the wire carries float32 only), so both sides hash
    exactly the bytes the wire carried."""
    crc = 0
    for name in sorted(dense):
        a = dense[name]
        if not isinstance(a, np.ndarray):
            raise TypeError(f"dense_digest: {name[:80]!r} is a {type(a).__name__}, not a numpy array")
        a = np.asarray(a, dtype=np.float32, order="C")     # not ascontiguousarray: it makes a () a (1,)
        crc = zlib.crc32(name.encode(), crc)
        crc = zlib.crc32(("(" + ",".join(str(d) for d in a.shape) + ")").encode(), crc)
        crc = zlib.crc32(a.reshape(-1).view(np.uint8), crc)     # no copy; an empty one too
    return crc


def wants_digest(req: ps_pb2.PullRequest) -> bool:
    """Whether a pull's reply carries the state digest: only a delta pull of the whole shard.

    A full pull (since 0) returns every tensor, so the client's copy is the reply itself and there
    is nothing to compare; a pull of named tensors or of rows only assembles no copy of the shard."""
    return req.since_seq > 0 and not req.no_dense and not req.names
