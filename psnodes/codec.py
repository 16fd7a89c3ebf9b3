"""Conversions between wire messages and numpy arrays, with the input checks of the wire contract.

Every check names the field and the fix and runs before any state changes, so a rejected
request leaves the shard exactly as it was.
"""
from __future__ import annotations

import numpy as np

from .errors import InvalidArgument
from .proto import ps_pb2

DTYPE = "float32"


def tensor_to_pb(name: str, arr: np.ndarray) -> ps_pb2.Tensor:
    a = np.ascontiguousarray(arr, dtype=np.float32)
    return ps_pb2.Tensor(name=name, shape=list(a.shape), dtype=DTYPE, data=a.tobytes())


def tensor_from_pb(t: ps_pb2.Tensor, field: str = "dense", check_finite: bool = True) -> np.ndarray:
    """Decode and check one dense tensor; raises InvalidArgument naming `field[name]`."""
    where = f"{field}[{t.name!r}]"
    if not t.name:
        raise InvalidArgument(f"{field}: a tensor has an empty name; give every tensor its parameter name")
    if t.dtype != DTYPE:
        raise InvalidArgument(f"{where}.dtype={t.dtype!r} is not supported; send float32")
    if any(d < 0 for d in t.shape):
        raise InvalidArgument(f"{where}.shape={list(t.shape)} has a negative dimension")
    n = int(np.prod(t.shape)) if len(t.shape) else 1
    if n * 4 != len(t.data):
        raise InvalidArgument(f"{where}: shape {list(t.shape)} needs {n * 4} bytes of data, got {len(t.data)}")
    arr = np.frombuffer(t.data, dtype=np.float32).reshape(tuple(t.shape))
    if check_finite and not np.isfinite(arr).all():
        raise InvalidArgument(f"{where} holds NaN or Inf values; clip or skip the gradient before pushing")
    return arr


def rows_to_pb(table: str, ids: np.ndarray, data: np.ndarray | None, dim: int) -> ps_pb2.Rows:
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    raw = b"" if data is None else np.ascontiguousarray(data, dtype=np.float32).tobytes()
    return ps_pb2.Rows(table=table, ids=ids.tobytes(), dim=dim, data=raw)


def ids_from_pb(r: ps_pb2.Rows, field: str = "sparse") -> np.ndarray:
    where = f"{field}[{r.table!r}]"
    if len(r.ids) % 8:
        raise InvalidArgument(f"{where}.ids has {len(r.ids)} bytes; send int64 ids (8 bytes each)")
    ids = np.frombuffer(r.ids, dtype=np.int64)
    if ids.size and ids.min() < 0:
        raise InvalidArgument(f"{where}.ids holds negative id {int(ids.min())}; ids must be >= 0")
    return ids


def rows_from_pb(r: ps_pb2.Rows, dim: int, field: str = "sparse") -> tuple[np.ndarray, np.ndarray]:
    """Decode and check embedding gradient rows against the table's dimension."""
    where = f"{field}[{r.table!r}]"
    ids = ids_from_pb(r, field)
    if r.dim != dim:
        raise InvalidArgument(f"{where}.dim={r.dim} does not match the table's dim {dim}")
    if len(r.data) != ids.size * dim * 4:
        raise InvalidArgument(f"{where}.data has {len(r.data)} bytes; {ids.size} ids x dim {dim} "
                              f"float32 needs {ids.size * dim * 4}")
    data = np.frombuffer(r.data, dtype=np.float32).reshape(ids.size, dim)
    if not np.isfinite(data).all():
        raise InvalidArgument(f"{where}.data holds NaN or Inf values; clip or skip the gradient before pushing")
    return ids, data
