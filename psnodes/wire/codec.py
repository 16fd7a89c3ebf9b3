"""Conversions between wire messages and numpy arrays, with the input checks of the wire contract.

Every check names the field and the fix and runs before any state changes, so a rejected
request leaves the shard exactly as it was. Sizes are computed in Python integers, never numpy's
fixed-width ones: a shape of [2**32, 2**32] must not overflow to 0 elements and pass.
"""
from __future__ import annotations

import math

import numpy as np

from pschaos.psnodes.errors import InvalidArgument, TooLarge
from pschaos.psnodes.wire.limits import DEFAULT, Limits
from pschaos.psnodes.proto import ps_pb2

DTYPE = "float32"


def tensor_to_pb(name: str, arr: np.ndarray) -> ps_pb2.Tensor:
    a = np.asarray(arr, dtype=np.float32, order="C")     # keeps a scalar's shape (); ascontiguousarray makes it (1,)
    return ps_pb2.Tensor(name=name, shape=list(a.shape), dtype=DTYPE, data=a.tobytes())


def check_name(name: str, field: str, limits: Limits = DEFAULT) -> None:
    if not name:
        raise InvalidArgument(f"{field}: a tensor has an empty name; give every tensor its parameter name")
    if len(name.encode()) > limits.max_name_bytes:
        raise InvalidArgument(f"{field}: name of {len(name.encode())} bytes is longer than "
                              f"limits.max_name_bytes={limits.max_name_bytes}")


def check_shape(shape, where: str, limits: Limits = DEFAULT) -> int:
    """The element count of `shape` after checking it against the limits (Python ints)."""
    if len(shape) > limits.max_dims:           # before any per-dimension work: a hostile shape may be long
        raise InvalidArgument(f"{where}.shape has {len(shape)} dimensions; at most limits.max_dims="
                              f"{limits.max_dims} are allowed")
    dims = [int(d) for d in shape]
    if not dims:
        return 1
    if min(dims) < 0:
        raise InvalidArgument(f"{where}.shape={dims} has a negative dimension")
    n = math.prod(dims)
    if n > limits.max_elements or max(dims) > limits.max_elements:
        raise TooLarge(f"{where}.shape={dims} exceeds limits.max_elements={limits.max_elements} "
                       "elements per tensor; split the parameter or raise the limit in the cluster config")
    return n


def element_count(shape, limits: Limits = DEFAULT) -> int | None:
    """`check_shape`'s count when the shape passes its limits, else None, formatting no message:
    a store checks every tensor of every push and replicated entry (half a million in one
    nemesis-soak on the twin), so the message is made only when `check_shape` then raises."""
    if len(shape) > limits.max_dims:
        return None
    n, cap = 1, limits.max_elements
    for d in shape:
        d = int(d)                  # a numpy int would wrap: [65536] * 4 is 0 in int64
        if d < 0 or d > cap:
            return None
        n *= d
    return n if n <= cap else None


def dense_elements(t: ps_pb2.Tensor, field: str = "dense", limits: Limits = DEFAULT) -> int:
    """The element count of a dense tensor's shape; raises check_shape's error naming `field[name]`."""
    n = element_count(t.shape, limits)
    return n if n is not None else check_shape(t.shape, f"{field}[{t.name[:80]!r}]", limits)


def check_magnitude(arr: np.ndarray, where: str, limits: Limits = DEFAULT) -> None:
    """Finite and within limits.max_abs_grad, so no optimizer step can overflow float32."""
    if not arr.size:
        return
    big = float(np.abs(arr).max())            # one pass: the max is NaN when any value is (NaN propagates)
    if not math.isfinite(big):
        raise InvalidArgument(f"{where} holds NaN or Inf values; clip or skip the gradient before pushing")
    if big > limits.max_abs_grad:
        raise InvalidArgument(f"{where} holds a component of magnitude {big:.3g} above limits.max_abs_grad="
                              f"{limits.max_abs_grad:g}; clip the gradient before pushing")


def tensor_from_pb(t: ps_pb2.Tensor, field: str = "dense", check_finite: bool = True,
                   limits: Limits = DEFAULT) -> np.ndarray:
    """Decode and check one dense tensor; raises InvalidArgument/TooLarge naming `field[name]`."""
    name, shape, data = t.name, t.shape, t.data
    n = element_count(shape, limits)
    if (n is not None and t.dtype == DTYPE and n * 4 == len(data) and name
            and (4 * len(name) <= limits.max_name_bytes or len(name.encode()) <= limits.max_name_bytes)):
        arr = np.frombuffer(data, dtype=np.float32).reshape(tuple(shape))    # every check passed: no message made
        if check_finite and not np.isfinite(arr).all():
            raise InvalidArgument(f"{field}[{name!r}] holds NaN or Inf values; clip or skip the gradient before pushing")
        return arr
    return _checked_tensor(t, field, check_finite, limits)


def _checked_tensor(t: ps_pb2.Tensor, field: str, check_finite: bool, limits: Limits) -> np.ndarray:
    """tensor_from_pb's slow path: each check in turn, so the first that fails names itself."""
    check_name(t.name, field, limits)
    where = f"{field}[{t.name!r}]"
    if t.dtype != DTYPE:
        raise InvalidArgument(f"{where}.dtype={t.dtype[:40]!r} is not supported; send float32")
    n = check_shape(t.shape, where, limits)
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


def ids_from_pb(r: ps_pb2.Rows, field: str = "sparse", limits: Limits = DEFAULT) -> np.ndarray:
    where = f"{field}[{r.table!r}]"
    if len(r.ids) % 8:
        raise InvalidArgument(f"{where}.ids has {len(r.ids)} bytes; send int64 ids (8 bytes each)")
    if len(r.ids) // 8 > limits.max_ids:
        raise TooLarge(f"{where}.ids holds {len(r.ids) // 8} ids; at most limits.max_ids={limits.max_ids} "
                       "per request: split the request")
    ids = np.frombuffer(r.ids, dtype="<i8")
    if ids.size and ids.min() < 0:
        raise InvalidArgument(f"{where}.ids holds negative id {int(ids.min())}; ids must be >= 0")
    return ids


def rows_from_pb(r: ps_pb2.Rows, dim: int, field: str = "sparse",
                 limits: Limits = DEFAULT) -> tuple[np.ndarray, np.ndarray]:
    """Decode and check embedding gradient rows against the table's dimension."""
    where = f"{field}[{r.table!r}]"
    ids = ids_from_pb(r, field, limits)
    if r.dim != dim:
        raise InvalidArgument(f"{where}.dim={r.dim} does not match the table's dim {dim}")
    if len(r.data) != ids.size * dim * 4:
        raise InvalidArgument(f"{where}.data has {len(r.data)} bytes; {ids.size} ids x dim {dim} "
                              f"float32 needs {ids.size * dim * 4}")
    data = np.frombuffer(r.data, dtype=np.float32).reshape(ids.size, dim)
    check_magnitude(data, f"{where}.data", limits)
    return ids, data
