"""A compact container for named numpy arrays plus a JSON header: snapshots, deltas, checkpoints.

npz spends a zip record on every array; catch-up deltas carry many small arrays and are judged
by the bytes they move, so this format costs one JSON line per array and nothing else. It never
unpickles anything, and `unpack` checks every index entry against the bytes it has (a blob can
arrive from the wire), raising ValueError for anything malformed.
"""
from __future__ import annotations

import json
import math
import struct

import numpy as np

_MAGIC = b"PSB1"
#: the only array types a psnodes state holds: float32 values, int64 ids/steps/seqs
DTYPES = ("<f4", "<i8")
MAX_DIMS = 32


def pack(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    index = []
    chunks = []
    off = 0
    for name, a in arrays.items():
        a = np.asarray(a, order="C")      # not ascontiguousarray: that turns a scalar's shape () into (1,)
        raw = a.tobytes()
        index.append([name, a.dtype.str, list(a.shape), off, len(raw)])
        chunks.append(raw)
        off += len(raw)
    head = json.dumps({"meta": meta, "arrays": index}, separators=(",", ":")).encode()
    return b"".join([_MAGIC, struct.pack("<I", len(head)), head, *chunks])


def _entry(e, body: int) -> tuple[str, np.dtype, tuple[int, ...], int, int]:
    if not (isinstance(e, list) and len(e) == 5):
        raise ValueError(f"array index entry {str(e)[:80]} is not [name, dtype, shape, offset, size]")
    name, dt, shape, off, size = e
    if not isinstance(name, str) or dt not in DTYPES:
        raise ValueError(f"array {str(name)[:80]}: dtype {str(dt)[:20]} is not one of {', '.join(DTYPES)}")
    if not (isinstance(shape, list) and len(shape) <= MAX_DIMS
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise ValueError(f"array {name[:80]}: shape {str(shape)[:80]} is not a list of at most {MAX_DIMS} "
                         "non-negative integers")
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (off, size)):
        raise ValueError(f"array {name[:80]}: offset and size must be non-negative integers")
    dtype = np.dtype(dt)
    if size != math.prod(shape) * dtype.itemsize or off + size > body:
        raise ValueError(f"array {name[:80]}: shape {shape} and size {size} do not fit the blob")
    return name, dtype, tuple(shape), off, size


def unpack(blob: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """The header's meta and the arrays, as read-only views of `blob`; ValueError if malformed."""
    if blob[:4] != _MAGIC:
        raise ValueError("not a psnodes state blob (bad magic); was the file written by psnodes?")
    if len(blob) < 8:
        raise ValueError("state blob is truncated before its header length")
    (n,) = struct.unpack("<I", blob[4:8])
    if 8 + n > len(blob):
        raise ValueError(f"state blob header of {n} bytes runs past the blob's {len(blob)} bytes")
    try:
        head = json.loads(bytes(blob[8:8 + n]))
    except (ValueError, UnicodeDecodeError, RecursionError, MemoryError) as e:
        raise ValueError(f"state blob header is not JSON this format can hold: {type(e).__name__}: "
                         f"{str(e)[:80]}") from None
    if not (isinstance(head, dict) and isinstance(head.get("meta"), dict) and isinstance(head.get("arrays"), list)):
        raise ValueError("state blob header must be {\"meta\": {...}, \"arrays\": [...]}")
    base = 8 + n
    arrays = {}
    for e in head["arrays"]:
        name, dtype, shape, off, size = _entry(e, len(blob) - base)
        if name in arrays:
            raise ValueError(f"array {name[:80]} appears twice in the state blob")
        arrays[name] = np.frombuffer(blob, dtype=dtype, count=size // dtype.itemsize, offset=base + off).reshape(shape)
    return head["meta"], arrays
