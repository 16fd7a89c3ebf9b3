"""Every check a state blob (snapshot, delta, checkpoint) must pass before a store takes any of it.

A blob arrives from the wire (a primary's catch-up) or from disk (a checkpoint), so it is input
like any other: the store imports only a blob that this module found complete and consistent
with the shard's spec, and a blob that is not changes nothing. The checks follow what
`ShardStore.export_state` writes: the meta fields with their types, for every dense name its
values and the optimizer's slots of the same shape, for every table its ids, rows, steps, mod
and slots of matching lengths; no array that the export would not write.
"""
from __future__ import annotations

import numpy as np

from pschaos.psnodes.errors import InvalidArgument
from pschaos.psnodes.wire.limits import Limits
from pschaos.psnodes.placement import is_audit

F4, I8 = np.dtype("<f4"), np.dtype("<i8")


def _int(v, field: str, lo: int = 0) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < lo or v >= 1 << 63:
        raise InvalidArgument(f"state.meta.{field}={str(v)[:40]} must be an integer >= {lo}")
    return v


def _str_int_map(v, field: str, lo: int) -> dict:
    if not isinstance(v, dict):
        raise InvalidArgument(f"state.meta.{field} must be a mapping of names to integers")
    for k, x in v.items():
        _int(x, f"{field}[{k[:40]!r}]", lo)
    return v


def _pairs(v, field: str) -> list:
    if not isinstance(v, list) or not all(isinstance(p, list) and len(p) == 2 for p in v):
        raise InvalidArgument(f"state.meta.{field} must be a list of [integer, integer] pairs")
    for i, (a, b) in enumerate(v):
        _int(a, f"{field}[{i}][0]")
        _int(b, f"{field}[{i}][1]")
    return v


def _applied(v) -> None:
    if not isinstance(v, dict) or not isinstance(v.get("ranges", {}), dict):
        raise InvalidArgument("state.meta.applied must be {\"ranges\": {key: [[lo, hi], ...]}, \"recent\": {...}}")
    for k, rs in v.get("ranges", {}).items():
        for lo, hi in _pairs(rs, f"applied.ranges[{k[:40]!r}]"):
            if lo > hi:
                raise InvalidArgument(f"state.meta.applied.ranges[{k[:40]!r}] has a range [{lo}, {hi}] with lo > hi")
    recent = v.get("recent", {})
    if not isinstance(recent, dict):
        raise InvalidArgument("state.meta.applied.recent must be a mapping")
    for k, pairs in recent.items():
        _pairs(pairs, f"applied.recent[{k[:40]!r}]")


def _array(arrays: dict, name: str, dtype: np.dtype, shape: tuple | None = None, ndim: int | None = None):
    a = arrays.get(name)
    if a is None:
        raise InvalidArgument(f"state: array {name[:80]!r} is missing")
    if a.dtype != dtype or (shape is not None and a.shape != shape) or (ndim is not None and a.ndim != ndim):
        raise InvalidArgument(f"state: array {name[:80]!r} is {a.dtype}{list(a.shape)}, expected "
                              f"{dtype}{list(shape) if shape is not None else f' with {ndim} dims'}")
    if dtype == F4 and not np.isfinite(a).all():
        raise InvalidArgument(f"state: array {name[:80]!r} holds NaN or Inf values")
    return a


def check_state(meta: dict, arrays: dict[str, np.ndarray], shard: int, tables: dict[str, int],
                slot_names: list[str], limits: Limits, seq: int, dense_shapes: dict[str, tuple]) -> None:
    """Raise InvalidArgument naming the first thing wrong with a blob, given the store's shard, its
    tables {name: dim}, its optimizer's slot names, its seq and its dense shapes (a delta must
    start at our seq and keep every shape)."""
    for k in ("full", "base_seq", "seq", "seq_epoch", "shard", "epochs", "dense", "dense_steps", "dense_mod",
              "clocks", "pushes", "applied"):
        if k not in meta:
            raise InvalidArgument(f"state.meta.{k} is missing; send a blob written by ShardStore.export_state")
    if meta["shard"] != shard:
        raise InvalidArgument(f"state blob is of shard {str(meta['shard'])[:20]}, not shard {shard}")
    if not isinstance(meta["full"], bool):
        raise InvalidArgument("state.meta.full must be true or false")
    base, to = _int(meta["base_seq"], "base_seq"), _int(meta["seq"], "seq")
    _int(meta["seq_epoch"], "seq_epoch")
    _int(meta["pushes"], "pushes")
    if meta["full"] and base != 0:
        raise InvalidArgument(f"state.meta.base_seq={base}: a full snapshot starts at 0")
    if not meta["full"] and base != seq:
        raise InvalidArgument(f"delta starts at seq {base} but this copy is at {seq}")
    if to < base:
        raise InvalidArgument(f"state.meta.seq={to} is below its base_seq={base}")
    _pairs(meta["epochs"], "epochs")
    _str_int_map(meta["clocks"], "clocks", -(1 << 63))
    _applied(meta["applied"])
    names = meta["dense"]
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
        raise InvalidArgument("state.meta.dense must be a list of distinct non-empty parameter names")
    steps, mods = _str_int_map(meta["dense_steps"], "dense_steps", 0), _str_int_map(meta["dense_mod"], "dense_mod", 0)
    expected = set()
    for n in names:
        if n not in steps or n not in mods:
            raise InvalidArgument(f"state.meta: dense {n[:80]!r} has no dense_steps or dense_mod entry")
        a = arrays.get(f"d/{n}")
        if a is None or a.ndim > limits.max_dims or a.size > limits.max_elements:
            raise InvalidArgument(f"state: dense {n[:80]!r} is missing or over the limits")
        if not meta["full"] and n in dense_shapes and dense_shapes[n] != a.shape:
            raise InvalidArgument(f"state: dense {n[:80]!r} has shape {list(a.shape)}, this copy's is "
                                  f"{list(dense_shapes[n])}: a parameter never changes shape")
        _array(arrays, f"d/{n}", F4)
        expected.add(f"d/{n}")
        for k in ([] if is_audit(n) else slot_names):
            _array(arrays, f"ds/{k}/{n}", F4, a.shape)
            expected.add(f"ds/{k}/{n}")
    for t, dim in tables.items():
        p = f"t/{t}/"
        ids = _array(arrays, f"{p}ids", I8, ndim=1)
        if ids.size and (ids.min() < 0 or np.unique(ids).size != ids.size):
            raise InvalidArgument(f"state: table {t!r} ids must be distinct and >= 0")
        _array(arrays, f"{p}rows", F4, (ids.size, dim))
        _array(arrays, f"{p}steps", I8, (ids.size,))
        _array(arrays, f"{p}mod", I8, (ids.size,))
        expected |= {f"{p}ids", f"{p}rows", f"{p}steps", f"{p}mod"}
        for k in slot_names:
            _array(arrays, f"{p}slot/{k}", F4, (ids.size, dim))
            expected.add(f"{p}slot/{k}")
    extra = sorted(set(arrays) - expected)
    if extra:
        raise InvalidArgument(f"state: unexpected array(s) {', '.join(e[:60] for e in extra[:3])}; "
                              "the blob does not match this shard's tables and optimizer")
