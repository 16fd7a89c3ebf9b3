"""The checks of an update before it is applied: `validate` decodes and checks all of it,
the duplicate lookups find a retried push in the applied set, `is_noop` an INIT that changes nothing.

None of them changes the state, so a refused request leaves the shard as it was: ShardStore.apply
takes only what `validate` returned. A part of ShardStore (store.py), over ShardState's fields.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pschaos.psnodes.store import moving
from pschaos.psnodes.store.applied import idem_key
from pschaos.psnodes.store.state import ShardState
from pschaos.psnodes.wire.codec import check_magnitude, dense_elements, rows_from_pb, tensor_from_pb
from pschaos.psnodes.core import dedup
from pschaos.psnodes.errors import InvalidArgument, NotFound, TooLarge
from pschaos.psnodes.placement import AUDIT_SLOTS, is_audit, owner, row_owners
from pschaos.psnodes.proto import ps_pb2


MAX_CLOCK = 1 << 62       # a clock at or above it would not survive a snapshot (statecheck: below 2**63)


@dataclass
class Decoded:
    """An update after validation: arrays ready to apply."""

    update: ps_pb2.Update
    dense: list[tuple[str, np.ndarray]]
    sparse: list[tuple[str, np.ndarray, np.ndarray]]
    internal: tuple | None = None          # MIGRATE, FENCE, UNFENCE, ROUTE: psnodes/store/moving.py's plan


class UpdateChecks(ShardState):
    """A part of ShardStore: what it decides about an update without changing anything."""

    def validate(self, upd: ps_pb2.Update, shapes: dict[str, tuple] | None = None,
                 shards: tuple[int, ...] | None = None) -> Decoded:
        """Decode and check an update without changing state; raises InvalidArgument, TooLarge or
        NotFound naming the field. `shapes` (name -> shape) and `shards` (the routing's shard set)
        stand for the state replicated entries will meet, when checked ahead of it; by default, ours."""
        s, lim = self.spec, self.spec.limits
        if upd.kind in moving.INTERNAL:
            return Decoded(upd, [], [], moving.decode(self, upd))
        if upd.kind not in (ps_pb2.Update.PUSH, ps_pb2.Update.INIT):
            raise InvalidArgument(f"update.kind={upd.kind} is unknown; send PUSH (0) or INIT (1)")
        push = upd.kind == ps_pb2.Update.PUSH
        if push and not upd.worker:
            raise InvalidArgument("update.worker is empty; every push names its worker (idempotency key)")
        if upd.clock >= MAX_CLOCK:
            raise InvalidArgument(f"update.clock={upd.clock} must be below 2**62 (a training step count)")
        if len(upd.worker.encode()) > lim.max_name_bytes:
            raise InvalidArgument(f"update.worker is longer than limits.max_name_bytes={lim.max_name_bytes}")
        if len(upd.dense) > lim.max_tensors:
            raise TooLarge(f"update.dense holds {len(upd.dense)} tensors; at most limits.max_tensors="
                           f"{lim.max_tensors} per request")
        elements = sum(dense_elements(t, "dense", lim) for t in upd.dense)
        elements += sum(len(r.data) // 4 for r in upd.sparse)
        if elements > lim.max_request_elements:
            raise TooLarge(f"update carries {elements} values; at most limits.max_request_elements="
                           f"{lim.max_request_elements} per request: split it")
        if sum(len(r.ids) // 8 for r in upd.sparse) > lim.max_ids:
            raise TooLarge(f"update.sparse holds more than limits.max_ids={lim.max_ids} ids; split it")
        have = shapes if shapes is not None else {n: a.shape for n, a in self.dense.items()}
        dense: list[tuple[str, np.ndarray]] = []
        seen: set[str] = set()
        for t in upd.dense:
            arr = tensor_from_pb(t, check_finite=not push, limits=lim)   # a push's: check_magnitude below
            if t.name in seen:
                raise InvalidArgument(f"dense[{t.name!r}] appears twice in one update; send each name once")
            seen.add(t.name)
            if not moving.owns(self, t.name, shards):
                raise InvalidArgument(f"dense[{t.name!r}] belongs to shard {owner(t.name, shards or self.shards)}, not shard "
                                      f"{s.shard} (routing epoch {self.routing_epoch}); route by pschaos.psnodes.placement")
            if is_audit(t.name) and (arr.shape != (AUDIT_SLOTS,)):
                raise InvalidArgument(f"dense[{t.name!r}]: an audit tensor has shape [{AUDIT_SLOTS}], not "
                                      f"{list(arr.shape)}")
            if push:
                if t.name not in have:
                    raise NotFound(f"dense[{t.name!r}] is not initialized on shard {s.shard}; "
                                   "push an INIT update with its initial value first")
                if tuple(have[t.name]) != arr.shape:
                    raise InvalidArgument(f"dense[{t.name!r}].shape={list(arr.shape)} does not match the "
                                          f"parameter's shape {list(have[t.name])}")
                check_magnitude(arr, f"dense[{t.name!r}]", lim)
            dense.append((t.name, arr))
        sparse: list[tuple[str, np.ndarray, np.ndarray]] = []
        tables: set[str] = set()
        for r in upd.sparse:
            if r.table not in self.tables:
                known = ", ".join(sorted(self.tables)) or "none"
                raise InvalidArgument(f"sparse[{r.table[:80]!r}]: unknown table; known tables: {known}")
            if not push:
                raise InvalidArgument(f"sparse[{r.table!r}]: INIT updates take dense tensors only; "
                                      "embedding rows are created on first touch")
            if r.table in tables:
                raise InvalidArgument(f"sparse[{r.table!r}] appears twice in one update; send each table once")
            tables.add(r.table)
            ids, data = rows_from_pb(r, self.tables[r.table].dim, limits=lim)
            homes = row_owners(r.table, ids, shards or self.shards)
            if ids.size and (homes != s.shard).any():
                bad = int(ids[homes != s.shard][0])
                raise InvalidArgument(f"sparse[{r.table!r}].ids: id {bad} belongs to shard "
                                      f"{int(homes[homes != s.shard][0])}, not {s.shard} (routing epoch "
                                      f"{self.routing_epoch}); route by pschaos.psnodes.placement.row_owners")
            sparse.append((r.table, ids, data))
        return Decoded(upd, dense, sparse)

    def duplicate_seq(self, upd: ps_pb2.Update) -> int | None:
        """For a PUSH whose idempotency key was applied: the seq that applied it (our seq when it
        has left the recent window). None for anything new."""
        return self.duplicate_of(upd)[0]

    def duplicate_of(self, upd: ps_pb2.Update) -> tuple[int | None, int | None]:
        """(duplicate_seq, applied_on): applied_on is the shard that applied a push this store knows
        only from a migrated applied set (its keys came here since); None when it applied it itself."""
        if upd.kind != ps_pb2.Update.PUSH:
            return None, None
        return self.duplicate_as(upd)[:2]

    def duplicate_as(self, upd: ps_pb2.Update) -> tuple[int | None, int | None, str]:
        """duplicate_of, and the fully qualified applied-set key of the ancestor that held it (the
        whole push or a coarser part it was split from; '' when it was its own key, or new). A part
        is a duplicate only of itself or an ancestor, never of a sibling part."""
        if upd.kind != ps_pb2.Update.PUSH:
            return None, None, ""
        origin = upd.origin if upd.HasField("origin") else None
        keys = moving.lineage(idem_key(upd.worker, upd.incarnation), origin, self.spec.shard, tuple(upd.part))
        for i, (local, full, by) in enumerate(keys):
            as_ = "" if i == len(keys) - 1 else full
            if self.applied.contains(local, upd.req_id):
                return dedup.retry_seq(self.applied.seq_of(local, upd.req_id), self.seq), None, as_
            if any(lo <= upd.req_id <= hi for lo, hi in self.foreign.get(full, ())):
                return self.seq, by, as_
        return None, None, ""

    def is_noop(self, dec: Decoded) -> bool:
        """An INIT whose tensors all exist changes nothing and is not logged."""
        return dedup.init_is_noop(dec.update.kind == ps_pb2.Update.INIT, (n for n, _ in dec.dense), self.dense)
