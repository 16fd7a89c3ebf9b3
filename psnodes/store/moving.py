"""A shard store's side of key migration: what it owns, its fence, and moving keys in and out.

Ownership is replicated state: the store holds the routing epoch and shard set its log has
reached (ROUTE entries move it forward), the fence of a migration in progress (FENCE, UNFENCE),
and the dedup state that came with imported keys (`foreign`: the applied sets of the shards the
keys came from, by fully qualified key `worker#incarnation@origin`). So a promoted replica owns,
refuses and recognises exactly what its old primary did. Export and import carry the values,
the optimizer state and the step counts of the moving keys, never anything else of the source.

Entries that remove keys (ROUTE drops what the shard no longer owns, UNFENCE drops what an
aborted migration brought in) set `shape_seq`: a catch-up delta from before it cannot express the
removal, so such a copy is caught up by a full snapshot instead (ShardStore.export_state).

The functions take the store's fields (pschaos.psnodes.store.state.ShardState), not ShardStore:
the store's checks, reads and mutations call them, so this module must not import the store back.
"""
from __future__ import annotations

import json
import zlib

import numpy as np

from pschaos.psnodes.store.blob import pack, unpack
from pschaos.psnodes.store.state import ShardState
from pschaos.psnodes.core import migration as mig
from pschaos.psnodes.errors import InvalidArgument
from pschaos.psnodes.store.holdings import rows_state_hash
from pschaos.psnodes.placement import AUDIT_SLOTS, audit_name, is_audit, owner, pinned_shard, row_owners
from pschaos.psnodes.proto import ps_pb2

INTERNAL = (ps_pb2.Update.MIGRATE, ps_pb2.Update.FENCE, ps_pb2.Update.UNFENCE, ps_pb2.Update.ROUTE)
KEEP_IMPORTED = 64          # import markers kept (a retried import of the same part is a no-op)


def fq(key: str, shard: int) -> str:
    """The fully qualified applied-set key: `worker#inc@origin` (own keys carry no origin)."""
    return key if "@" in key else f"{key}@{shard}"


def push_key(idem: str, origin: int | None, shard: int, part: tuple[int, ...] = ()) -> str:
    """The key a push is recorded under on `shard`: the bare `worker#inc` when it was numbered for
    this shard, `worker#inc@origin` when it was re-routed here whole from another shard's numbering
    (an older client), and `worker#inc@origin/t1/t2..` for a re-routed part: the shards it was
    split to, in order. Every part of one push is its own identity, so applying (or shipping the
    applied set of) one part never answers another as a duplicate."""
    if part:
        return f"{idem}@{origin if origin is not None else shard}/" + "/".join(str(int(t)) for t in part)
    return idem if origin is None or origin == shard else f"{idem}@{origin}"


def lineage(idem: str, origin: int | None, shard: int, part: tuple[int, ...] = ()) -> list[tuple[str, str, int]]:
    """The applied-set keys that prove a push (or part) applied: its own and its ancestors' (the whole
    push, then each coarser part it was split from, which held every key it holds), never a
    sibling's. Each as (key on `shard`, fully qualified key, the shard that applied it): a part is
    applied only by the shard it was sent to, the last of its path; the whole push by its origin."""
    o = origin if origin is not None else shard
    out = []
    if not part:
        k = push_key(idem, origin, shard)
        return [(k, fq(k, shard), o)]
    whole = f"{idem}@{o}"
    out.append((idem if o == shard else whole, whole, o))
    for i in range(1, len(part) + 1):
        k = push_key(idem, o, shard, tuple(part[:i]))
        out.append((k, k, int(part[i - 1])))
    return out


# ------------------------------------------------------------------ ownership
def owns(store: ShardState, name: str, shards: tuple[int, ...] | None = None) -> bool:
    pin = pinned_shard(name)
    if pin is not None:
        return pin == store.spec.shard
    return owner(name, shards or store.shards) == store.spec.shard


def owner_of(store: ShardState, name: str) -> int:
    return owner(name, store.shards)


def rows_owned(store: ShardState, table: str, ids: np.ndarray) -> np.ndarray:
    return row_owners(table, ids, store.shards) == store.spec.shard


def fenced_names(store: ShardState, names) -> list[str]:
    """Of `names`, those the store's fence freezes (they are moving to another shard)."""
    f = store.fence
    if not f:
        return []
    return [n for n in names if mig.moving_out(n, store.spec.shard, f["src"], f["dst"])]


def fenced_rows(store: ShardState, table: str, ids: np.ndarray) -> bool:
    f = store.fence
    return bool(f and ids.size and mig.rows_moving_out(table, ids, store.spec.shard, f["src"], f["dst"]).any())


def owned_dense(store: ShardState) -> dict[str, np.ndarray]:
    return {n: a for n, a in store.dense.items() if owns(store, n)}


def bucket_counts(store: ShardState) -> dict[str, dict[str, int]]:
    """{"__audit__/m<b>": {"worker-<j>": count}} for the migrating audit buckets this copy owns."""
    out = {}
    for n, a in store.dense.items():
        if is_audit(n) and pinned_shard(n) is None and owns(store, n):
            out[n] = {f"worker-{j}": int(round(float(a.flat[j]))) for j in np.flatnonzero(a).tolist()}
    return out


# --------------------------------------------------------------------- export
def export_keys(store: ShardState, to: int, src, dst, since: int) -> tuple[bytes, int, int]:
    """The keys moving from this shard to `to` and changed after `since` (all when 0), with their
    optimizer state and step counts, and this shard's dedup state; the blob, its raw key bytes,
    and how many dense tensors and rows it holds."""
    me = store.spec.shard
    arrays: dict[str, np.ndarray] = {}
    names = [n for n in sorted(store.dense) if mig.moving_to(n, me, to, src, dst) and store.dense_mod[n] > since]
    for n in names:
        arrays[f"d/{n}"] = store.dense[n]
        for k, v in store.dense_slots[n].items():
            arrays[f"ds/{k}/{n}"] = v
    rows = 0
    row_digests: dict[str, str] = {}
    for name, t in store.tables.items():
        ids = t.ids[: t.n]
        sel = np.nonzero(mig.rows_moving_to(name, ids, me, to, src, dst) & (t.mod[: t.n] > since))[0]
        rows += int(sel.size)
        if sel.size:
            row_digests[name] = rows_state_hash(t, sel)
        arrays[f"t/{name}/ids"] = t.ids[sel]
        arrays[f"t/{name}/rows"] = t.rows[sel]
        arrays[f"t/{name}/steps"] = t.steps[sel]
        for k, v in t.slots.items():
            arrays[f"t/{name}/slot/{k}"] = v[sel]
    applied = {fq(k, me): rs for k, rs in store.applied.ranges.items()}
    for k, rs in store.foreign.items():
        applied.setdefault(k, [])
        applied[k] = _union(applied[k], rs)
    meta = {"from": me, "to": to, "since": since, "dense": names,
            "dense_steps": {n: store.dense_steps[n] for n in names}, "applied": applied, "clocks": store.clocks,
            # the moving keys' whole state as this source holds it: the destination checks what it took
            "digests": key_digests(store, names), "row_digests": row_digests}
    key_bytes = sum(a.nbytes for k, a in arrays.items() if not k.endswith("/ids"))
    return pack(meta, arrays), key_bytes, len(names) + rows


def key_digests(store: ShardState, names) -> dict[str, int]:
    """CRC-32 of each dense key's whole state: its value, every optimizer slot by name, its step
    count. What a migration's source exports and its destination holds after the import must be
    equal key by key (harness/checkers/handoff.py)."""
    out = {}
    for n in names:
        if n not in store.dense:
            continue
        c = zlib.crc32(np.ascontiguousarray(store.dense[n]).tobytes())
        for k, v in sorted(store.dense_slots.get(n, {}).items()):
            c = zlib.crc32(k.encode() + np.ascontiguousarray(v).tobytes(), c)
        out[n] = zlib.crc32(str(int(store.dense_steps.get(n, 0))).encode(), c)
    return out


def import_record(store: ShardState, blob: bytes) -> dict:
    """After an IMPORT: the keys it carried, those whose state here differs from the source's
    digest (dense keys by name; a table's moved rows as one, `rows of <table>`: review of issue
    32, finding 3, rows reset or lost in a hand-off passed every check), and the applied ranges it
    carried that this copy's dedup state does not hold."""
    meta, arrays = unpack(blob)
    sent = meta.get("digests")
    got = key_digests(store, sent or ())
    differ = sorted(n for n in (sent or {}) if got.get(n) != sent[n])
    rows = sum(int(a.size) for k, a in arrays.items() if k.startswith("t/") and k.endswith("/ids"))
    for name, digest in sorted((meta.get("row_digests") or {}).items()):
        t, ids = store.tables.get(name), arrays.get(f"t/{name}/ids")
        pos = np.fromiter((t.index.get(int(i), -1) for i in ids), dtype=np.int64, count=ids.size) \
            if t is not None and ids is not None else np.array([-1])
        if (pos < 0).any() or rows_state_hash(t, pos) != digest:
            differ.append(f"rows of {name}")     # a row missing here, or its value, slots or step changed
    missing = sorted(k for k, rs in (meta.get("applied") or {}).items()
                     if _union(store.foreign.get(k, []), rs) != _union(store.foreign.get(k, []), []))
    return {"part": meta.get("part"), "from": meta.get("from"), "keys": len(meta.get("dense") or ()), "rows": rows,
            "digests": sent is not None, "row_digests": "row_digests" in meta, "differ": differ[:20], "differ_count": len(differ),
            "applied_missing": missing[:20], "applied_missing_count": len(missing)}


def _union(a: list, b: list) -> list:
    """The union of two lists of [lo, hi] ranges, merged."""
    out: list[list[int]] = []
    for lo, hi in sorted([*a, *b]):
        if out and out[-1][1] + 1 >= lo:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


# ----------------------------------------------------------------- decode
def decode(store: ShardState, upd: ps_pb2.Update) -> tuple:
    """Check an internal entry before anything is applied; the plan `apply_internal` carries out."""
    kind = upd.kind
    if kind == ps_pb2.Update.MIGRATE:
        try:
            meta, arrays = unpack(bytes(upd.meta))
        except ValueError as e:
            raise InvalidArgument(f"MIGRATE: state: {e}") from None
        _check_import(store, meta, arrays)
        return ("migrate", meta, arrays)
    try:
        meta = json.loads(bytes(upd.meta) or b"{}")
    except ValueError:
        raise InvalidArgument(f"update.meta of kind {kind} is not JSON") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("migration", ""), str):
        raise InvalidArgument("update.meta must be a JSON object with a string migration id")
    if kind in (ps_pb2.Update.FENCE, ps_pb2.Update.ROUTE):
        for f in ("src", "dst") if kind == ps_pb2.Update.FENCE else ("shards",):
            v = meta.get(f)
            if not isinstance(v, list) or not v or not all(isinstance(s, int) and 0 <= s < 1 << 20 for s in v):
                raise InvalidArgument(f"update.meta.{f} must be a non-empty list of shard ids")
    if kind == ps_pb2.Update.ROUTE and not (isinstance(meta.get("epoch"), int) and meta["epoch"] >= 0):
        raise InvalidArgument("update.meta.epoch of a ROUTE entry must be an integer >= 0")
    return (ps_pb2.Update.Kind.Name(kind).lower(), meta, None)


def _check_import(store: ShardState, meta: dict, arrays: dict) -> None:
    for k in ("from", "dense", "dense_steps", "applied", "clocks", "migration", "part"):
        if k not in meta:
            raise InvalidArgument(f"MIGRATE: state.meta.{k} is missing; send an EXPORT's state")
    slots = store.spec.optimizer.slot_names()
    for n in meta["dense"]:
        if not isinstance(n, str) or f"d/{n}" not in arrays or arrays[f"d/{n}"].dtype != np.float32:
            raise InvalidArgument(f"MIGRATE: dense {str(n)[:80]!r} has no float32 values")
        if n in store.dense and store.dense[n].shape != arrays[f"d/{n}"].shape:
            raise InvalidArgument(f"MIGRATE: dense {n[:80]!r} changes shape; a parameter never does")
        for k in ([] if is_audit(n) else slots):
            if arrays.get(f"ds/{k}/{n}") is None or arrays[f"ds/{k}/{n}"].shape != arrays[f"d/{n}"].shape:
                raise InvalidArgument(f"MIGRATE: dense {n[:80]!r} lacks its optimizer slot {k}")
    for name, t in store.tables.items():
        ids = arrays.get(f"t/{name}/ids")
        if ids is None:
            continue
        for k in ("rows", "steps", *[f"slot/{s}" for s in slots]):
            a = arrays.get(f"t/{name}/{k}")
            if a is None or a.shape[0] != ids.size or (a.ndim == 2 and a.shape[1] != t.dim):
                raise InvalidArgument(f"MIGRATE: table {name!r} array {k} does not match its ids")


def plan_effect(plan: tuple, shapes: dict, routing_epoch: int, shards: tuple) -> tuple[int, tuple]:
    """What an internal entry changes for the entries checked after it in the same batch (a replica
    checks a whole batch before it applies any): the dense shapes an import brings, the routing a
    ROUTE moves to. Returns the (routing epoch, shard set) the next entries meet."""
    kind, meta, arrays = plan
    if kind == "migrate":
        for n in meta["dense"]:
            shapes.setdefault(n, arrays[f"d/{n}"].shape)
    elif kind == "route" and meta["epoch"] > routing_epoch:
        return meta["epoch"], tuple(sorted(meta["shards"]))
    return routing_epoch, shards


def routing_of(meta: dict, default: tuple) -> tuple:
    """The shard set a state blob's meta carries (an older blob: `default`)."""
    return tuple(int(s) for s in meta["routing"][1]) if "routing" in meta else default


def routing_epoch_of(meta: dict, default: int) -> int:
    return int(meta["routing"][0]) if "routing" in meta else default


# ------------------------------------------------------------------ apply
def apply_internal(store: ShardState, plan: tuple, seq: int) -> None:
    kind, meta, arrays = plan
    me = store.spec.shard
    if kind == "migrate":
        marker = f"{meta['migration']}/{meta['part']}/{meta['from']}"
        if marker in store.imported:
            return
        _import(store, meta, arrays, seq)
        store.imported = (store.imported + [marker])[-KEEP_IMPORTED:]
        _ensure_audit(store, seq)
    elif kind == "fence":
        store.fence = {"migration": meta["migration"], "src": sorted(meta["src"]), "dst": sorted(meta["dst"])}
    elif kind == "unfence":
        if store.fence and store.fence["migration"] == meta["migration"]:
            store.fence = None
        if _drop_unowned(store):
            store.shape_seq = seq
    elif kind == "route":
        if meta["epoch"] > store.routing_epoch:
            store.routing_epoch, store.shards = meta["epoch"], tuple(sorted(meta["shards"]))
            store.fence = None
            if _drop_unowned(store):
                store.shape_seq = seq
            if me in store.shards:
                _ensure_audit(store, seq)


def _import(store: ShardState, meta: dict, arrays: dict, seq: int) -> None:
    for n in meta["dense"]:
        store.dense[n] = np.array(arrays[f"d/{n}"], dtype=np.float32, copy=True)
        store.dense_slots[n] = {} if is_audit(n) else {k: np.array(arrays[f"ds/{k}/{n}"], copy=True)
                                                        for k in store.spec.optimizer.slot_names()}
        store.dense_steps[n] = int(meta["dense_steps"][n])
        store.dense_mod[n] = seq
    for name, t in store.tables.items():
        ids = arrays.get(f"t/{name}/ids")
        if ids is None or ids.size == 0:
            continue
        t.merge({"ids": ids, "rows": arrays[f"t/{name}/rows"], "steps": arrays[f"t/{name}/steps"],
                 "mod": np.full(ids.size, seq, dtype=np.int64),
                 **{f"slot/{k}": arrays[f"t/{name}/slot/{k}"] for k in t.slots}}, "")
    for k, rs in meta["applied"].items():
        store.foreign[k] = _union(store.foreign.get(k, []), rs)
    for w, c in meta["clocks"].items():
        store.clocks[w] = max(int(c), store.clocks.get(w, -1))


def _ensure_audit(store: ShardState, seq: int) -> None:
    """A shard that takes keys (a new one) gets its own pinned audit tensor, zeros, as INIT would."""
    name = audit_name(store.spec.shard)
    if name not in store.dense:
        store.dense[name] = np.zeros(AUDIT_SLOTS, np.float32)
        store.dense_slots[name], store.dense_steps[name], store.dense_mod[name] = {}, 0, seq


def _drop_unowned(store: ShardState) -> bool:
    """Forget every key this shard does not own (in its routing) and is not fenced on: the keys a
    switch moved away, or those an aborted import brought. True when anything went."""
    gone = [n for n in store.dense if not owns(store, n)]
    for n in gone:
        for d in (store.dense, store.dense_slots, store.dense_steps, store.dense_mod):
            d.pop(n, None)
    dropped = bool(gone)
    for name, t in store.tables.items():
        keep = rows_owned(store, name, t.ids[: t.n])
        if not keep.all():
            t.keep(keep)
            dropped = True
    return dropped


# ------------------------------------------------------------------ state
def state_meta(store: ShardState) -> dict:
    return {"routing": [store.routing_epoch, list(store.shards)], "fence": store.fence, "foreign": store.foreign,
            "imported": store.imported, "shape_seq": store.shape_seq}


def take_meta(store: ShardState, meta: dict) -> None:
    if "routing" in meta:
        store.routing_epoch, store.shards = int(meta["routing"][0]), tuple(int(s) for s in meta["routing"][1])
    store.fence = meta.get("fence")
    store.foreign = {str(k): [list(r) for r in v] for k, v in (meta.get("foreign") or {}).items()}
    store.imported = [str(m) for m in meta.get("imported") or []]
    store.shape_seq = int(meta.get("shape_seq", 0))


def digest(store: ShardState, h) -> None:
    h.update(json.dumps(state_meta(store) | {"imported": None}, sort_keys=True).encode())
