"""A compact container for named numpy arrays plus a JSON header: snapshots, deltas, checkpoints.

npz spends a zip record on every array; catch-up deltas carry many small arrays and are judged
by the bytes they move, so this format costs one JSON line per array and nothing else. It never
unpickles anything.
"""
from __future__ import annotations

import json
import struct

import numpy as np

_MAGIC = b"PSB1"


def pack(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    index = []
    chunks = []
    off = 0
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        raw = a.tobytes()
        index.append([name, a.dtype.str, list(a.shape), off, len(raw)])
        chunks.append(raw)
        off += len(raw)
    head = json.dumps({"meta": meta, "arrays": index}, separators=(",", ":")).encode()
    return b"".join([_MAGIC, struct.pack("<I", len(head)), head, *chunks])


def unpack(blob: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    if blob[:4] != _MAGIC:
        raise ValueError("not a psnodes state blob (bad magic); was the file written by psnodes?")
    (n,) = struct.unpack("<I", blob[4:8])
    head = json.loads(blob[8:8 + n])
    base = 8 + n
    arrays = {}
    for name, dt, shape, off, size in head["arrays"]:
        arrays[name] = np.frombuffer(blob, dtype=np.dtype(dt), count=size // np.dtype(dt).itemsize,
                                     offset=base + off).reshape(shape)
    return head["meta"], arrays
