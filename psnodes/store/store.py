"""The versioned key-value state of one shard: dense tensors, embedding tables, optimizer state.

Every applied update gets the shard's next sequence number and lands in the bounded update log.
Application is deterministic, so two copies that applied the same log have the same checksum;
`validate` runs every check before `apply` touches anything, so a bad request changes nothing.
The audit tensor `__audit__/<shard>` is the exception to the optimizer: plain SGD with lr 1 and
no slots, so its value counts applied pushes exactly, whatever the cluster trains with.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from pschaos.psnodes.store import moving
from pschaos.psnodes.store.applied import AppliedSet, idem_key
from pschaos.psnodes.store.blob import pack, unpack
from pschaos.psnodes.wire.codec import check_magnitude, dense_elements, ids_from_pb, rows_from_pb, tensor_from_pb
from pschaos.psnodes.core import dedup, fencing, gating, logmatch
from pschaos.psnodes.store.embedding import EmbeddingTable
from pschaos.psnodes.errors import InvalidArgument, NotFound, TooLarge
from pschaos.psnodes.wire.limits import Limits
from pschaos.psnodes.store.optimizers import OptimizerConfig, stepped
from pschaos.psnodes.placement import AUDIT_SLOTS, audit_name, is_audit, owner, row_owners
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.statecheck import check_state
from pschaos.psnodes.store.updatelog import Entry, UpdateLog
from pschaos.psnodes.wire.wire import parse


MAX_CLOCK = 1 << 62       # a clock at or above it would not survive a snapshot (statecheck: below 2**63)


@dataclass
class ShardSpec:
    """What a shard needs to know to check and apply updates."""

    shard: int
    num_shards: int
    tables: dict[str, int] = field(default_factory=dict)   # table name -> dim
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    seed: int = 0
    workers: int = 0                                        # expected workers, for BSP/SSP clocks
    log_entries: int = 4096
    log_bytes: int = 256 << 20
    limits: Limits = field(default_factory=Limits)
    max_reply_bytes: int = 256 << 20                        # the gRPC message limit of the node


@dataclass
class Decoded:
    """An update after validation: arrays ready to apply."""

    update: ps_pb2.Update
    dense: list[tuple[str, np.ndarray]]
    sparse: list[tuple[str, np.ndarray, np.ndarray]]
    internal: tuple | None = None          # MIGRATE, FENCE, UNFENCE, ROUTE: psnodes/store/moving.py's plan


class ShardStore:
    def __init__(self, spec: ShardSpec) -> None:
        self.spec = spec
        self.dense: dict[str, np.ndarray] = {}
        self.dense_slots: dict[str, dict[str, np.ndarray]] = {}
        self.dense_steps: dict[str, int] = {}
        self.dense_mod: dict[str, int] = {}
        self.tables = {name: EmbeddingTable(name, dim, spec.optimizer, spec.seed)
                       for name, dim in spec.tables.items()}
        self.applied = AppliedSet()
        self.clocks: dict[str, int] = {}
        self.pushes = 0                    # PUSH updates applied
        self.seq = 0
        self.seq_epoch = 0
        self.epochs: list[list[int]] = []   # [epoch, first seq] each time the epoch changed
        self.log = UpdateLog(spec.log_entries, spec.log_bytes)
        # elastic shards (psnodes/store/moving.py): the routing epoch and shard set the log has reached,
        # the fence of a migration in progress, migrated dedup state, imports taken
        self.routing_epoch = 0
        self.shards: tuple[int, ...] = tuple(range(spec.num_shards))
        self.fence: dict | None = None
        self.foreign: dict[str, list[list[int]]] = {}
        self.imported: list[str] = []
        self.shape_seq = 0                 # the last entry that removed keys (catch-up by snapshot before it)

    # ----------------------------------------------------------------- checks
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

    # ---------------------------------------------------------------- mutation
    def apply(self, dec: Decoded, payload: bytes, epoch: int) -> int:
        """Apply a validated update as the next seq and log it; returns the seq. A push is computed
        aside first and stored only when every value it leaves is finite (else InvalidArgument and
        nothing changed): validate, then apply atomically."""
        seq = self.seq + 1
        upd = dec.update
        if dec.internal is not None:
            moving.apply_internal(self, dec.internal, seq)
        elif upd.kind == ps_pb2.Update.INIT:
            for name, arr in dec.dense:
                if name not in self.dense:
                    self.dense[name] = arr.astype(np.float32, copy=True)
                    self.dense_slots[name] = {} if is_audit(name) else self.spec.optimizer.new_slots(arr.shape)
                    self.dense_steps[name] = 0
                    self.dense_mod[name] = seq
        else:
            dense, rows = self._step(dec)
            for name, (value, slots) in dense.items():
                self.dense[name], self.dense_slots[name] = value, slots
                self.dense_steps[name] += 1
                self.dense_mod[name] = seq
            for table, step in rows:
                self.tables[table].commit(step, seq)
            origin = upd.origin if upd.HasField("origin") else None
            self.applied.add(moving.push_key(idem_key(upd.worker, upd.incarnation), origin, self.spec.shard,
                                             tuple(upd.part)), upd.req_id, seq)
            self.pushes += 1
            if upd.clock >= 0:
                self.clocks[upd.worker] = gating.advance(self.clocks, upd.worker, upd.clock)
        if epoch != self.seq_epoch:
            self.epochs.append([epoch, seq])
        self.seq, self.seq_epoch = seq, epoch
        self.log.append(Entry(seq, epoch, payload))
        return seq

    def _step(self, dec: Decoded) -> tuple[dict, list]:
        """A push's new dense values and slots and its embedding row steps, computed aside; raises
        InvalidArgument when any of them is not finite (the optimizer would store NaN or Inf)."""
        cfg = self.spec.optimizer
        dense = {}
        with np.errstate(over="ignore", invalid="ignore"):      # an overflow is refused below, not warned
            for name, grad in dec.dense:
                if is_audit(name):
                    dense[name] = (self.dense[name] - grad, {})    # plain SGD, lr 1: a count, not a parameter
                else:
                    dense[name] = stepped(cfg, self.dense[name], grad, self.dense_slots[name],
                                          self.dense_steps[name] + 1)
            rows = [(table, self.tables[table].prepare(ids, data)) for table, ids, data in dec.sparse]
        for name, (value, slots) in dense.items():
            if not (np.isfinite(value).all() and all(np.isfinite(v).all() for v in slots.values())):
                raise InvalidArgument(f"dense[{name!r}]: this gradient would leave the parameter or its optimizer "
                                      "state non-finite; clip the gradient or lower the learning rate")
        for table, step in rows:
            if not self.tables[table].finite(step):
                raise InvalidArgument(f"sparse[{table!r}]: this gradient would leave rows or their optimizer "
                                      "state non-finite; clip the gradient or lower the learning rate")
        return dense, rows

    def take_replicated(self, state: bytes, entries: Iterable[Entry], primary_seq: int, primary_seq_epoch: int,
                        in_sync: bool, epoch: int | None = None) -> bool:
        """Take what a primary sent, in order: a delta or snapshot, then log entries, stopping at a
        gap; return whether this copy is now in sync with it (log matching: the same last entry,
        seq and epoch, not just the same length). Both shells, real and simulated, call this.

        Everything is checked before anything is taken (the blob, then each entry against the
        state it will meet, none from an epoch above the sender's `epoch`), so a refused call
        (InvalidArgument) leaves the copy as it was."""
        return self.take_plan(self.plan_replicated(state, entries, epoch), primary_seq, primary_seq_epoch, in_sync)

    def plan_replicated(self, state: bytes, entries: Iterable[Entry], epoch: int | None = None) -> tuple:
        """Check what a primary sent (the blob, then each entry against the state it will meet),
        changing nothing; the plan `take_plan` carries out. InvalidArgument names what is wrong."""
        entries = list(entries)
        checked = self.check_state(state) if state else None
        return checked, self._check_entries(entries, checked, epoch)

    def take_plan(self, plan: tuple, primary_seq: int, primary_seq_epoch: int, in_sync: bool) -> bool:
        checked, steps = plan
        if checked is not None:
            self._take_state(*checked)
        for e, dec in steps:
            self.apply(dec, e.payload, e.epoch)
        return fencing.reached_sync(in_sync, self.seq, self.seq_epoch, primary_seq, primary_seq_epoch)

    def _check_entries(self, entries: list[Entry], checked: tuple | None,
                       epoch: int | None) -> list[tuple[Entry, Decoded]]:
        """The entries to apply, each decoded and checked against the state it will meet."""
        shapes = {n: a.shape for n, a in self.dense.items()}
        seq, seq_epoch = self.seq, self.seq_epoch
        if checked is not None:
            meta, arrays = checked
            if meta["full"]:
                shapes = {}
            shapes.update({n: arrays[f"d/{n}"].shape for n in meta["dense"]})
            seq, seq_epoch = meta["seq"], meta["seq_epoch"]
        plan = []
        shards = self.shards if checked is None else moving.routing_of(checked[0], self.shards)
        routing_epoch = self.routing_epoch if checked is None else moving.routing_epoch_of(checked[0], self.routing_epoch)
        for i, e in enumerate(entries):
            step = fencing.take_entry(seq, e.seq)
            if step is fencing.Entry.GAP:
                break
            if step is fencing.Entry.SKIP:
                continue
            if e.epoch < seq_epoch or (epoch is not None and e.epoch > epoch):
                raise InvalidArgument(f"entries[{i}] (seq {e.seq}) has epoch {e.epoch}, outside "
                                      f"[{seq_epoch}, {epoch}]: entries never go back in epoch nor come from a later one")
            try:
                dec = self.validate(parse(ps_pb2.Update, e.payload, f"Replicate entries[{i}].payload"), shapes, shards)
            except (InvalidArgument, NotFound) as err:
                raise InvalidArgument(f"entries[{i}] (seq {e.seq}): {err}") from None
            for name, arr in dec.dense:
                shapes.setdefault(name, arr.shape)
            if dec.internal is not None:      # an import brings keys, a switch moves the routing: the next entries meet them
                routing_epoch, shards = moving.plan_effect(dec.internal, shapes, routing_epoch, shards)
            plan.append((e, dec))
            seq, seq_epoch = e.seq, e.epoch
        return plan

    def apply_entry(self, e: Entry) -> None:
        """Apply a replicated entry; it must be exactly the next seq."""
        if e.seq != self.seq + 1:
            raise InvalidArgument(f"entry seq {e.seq} does not follow applied seq {self.seq}")
        self.take_replicated(b"", [e], e.seq, e.epoch, True)

    # ------------------------------------------------------------------ reads
    def pull_dense(self, since: int, names: list[str]) -> list[tuple[str, np.ndarray]]:
        """Dense tensors changed after `since` (all of them when since == 0).

        The arrays are the live ones, not copies: encode them before the next update applies."""
        wanted = names or sorted(n for n in self.dense if moving.owns(self, n))
        out = []
        for n in wanted:
            if n not in self.dense:
                raise NotFound(f"names: dense {n[:80]!r} is not on shard {self.spec.shard}")
            if self.dense_mod[n] > since:
                out.append((n, self.dense[n]))
        size = sum(a.nbytes for _, a in out)
        if size > self.spec.max_reply_bytes:
            raise TooLarge(f"the pull would return {size} bytes, above the {self.spec.max_reply_bytes}-byte message "
                           "limit; pull by names, a few at a time")
        return out

    def check_pull(self, req: ps_pb2.PullRequest) -> list[np.ndarray]:
        """Check a pull before it takes the lock (its cost is bounded by the limits, so no pull holds
        the shard long enough for replicas to suspect the primary); returns the ids per Rows."""
        lim = self.spec.limits
        if len(req.names) > lim.max_tensors:
            raise TooLarge(f"names holds {len(req.names)} names; at most limits.max_tensors={lim.max_tensors}")
        if len(set(req.names)) != len(req.names):
            raise InvalidArgument("names repeats a name; ask for each dense tensor once")
        for i, n in enumerate(req.names):
            if len(n.encode()) > lim.max_name_bytes:
                raise InvalidArgument(f"names[{i}] is longer than limits.max_name_bytes={lim.max_name_bytes}")
        if sum(len(r.ids) // 8 for r in req.sparse) > lim.max_ids:
            raise TooLarge(f"sparse holds more than limits.max_ids={lim.max_ids} ids in all; split the pull")
        out = []
        for r in req.sparse:
            if r.table not in self.tables:
                known = ", ".join(sorted(self.tables)) or "none"
                raise InvalidArgument(f"sparse[{r.table[:80]!r}]: unknown table; known tables: {known}")
            out.append(ids_from_pb(r, limits=lim))
        return out

    def pull_rows(self, table: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Current rows of checked `ids` (see check_pull)."""
        t = self.tables[table]
        return ids, t.lookup(ids), t.dim

    def audit_counts(self) -> dict[str, int] | None:
        """{"worker-<j>": pushes of worker j applied here} for the nonzero slots of this shard's
        audit tensor; None when this copy has no audit tensor."""
        a = self.dense.get(audit_name(self.spec.shard))
        if a is None:
            return None
        return {f"worker-{j}": int(round(float(a.flat[j]))) for j in np.flatnonzero(a).tolist()}

    # -------------------------------------------------------- whole-state views
    def checksum(self) -> str:
        """A digest of parameters, optimizer state and applied keys: equal iff the copies agree."""
        h = hashlib.blake2b(digest_size=16)
        for n in sorted(self.dense):
            h.update(n.encode())
            h.update(repr(self.dense[n].shape).encode())     # a scalar () and a (1,) are not the same copy
            h.update(self.dense[n].tobytes())
            for s in sorted(self.dense_slots[n]):
                h.update(self.dense_slots[n][s].tobytes())
            h.update(str(self.dense_steps[n]).encode())
        for name in sorted(self.tables):
            self.tables[name].digest(h)
        h.update(json.dumps(self.applied.ranges, sort_keys=True).encode())
        moving.digest(self, h)
        return h.hexdigest()

    def state_bytes(self) -> int:
        """Size of the full state: what a catch-up by snapshot would move."""
        n = sum(a.nbytes + sum(v.nbytes for v in self.dense_slots[k].values()) for k, a in self.dense.items())
        return n + sum(t.nbytes() for t in self.tables.values())

    def epoch_of(self, seq: int) -> int:
        """Epoch of the entry at `seq` (0 for seq 0), from the epoch history."""
        return logmatch.epoch_of(self.epochs, seq)

    def matches(self, seq: int, epoch: int) -> bool:
        """True when a copy at (seq, epoch) holds a prefix of this copy's history (log matching)."""
        return logmatch.matches(self.epochs, self.seq, seq, epoch)

    def export_state(self, since: int = 0) -> tuple[bytes, int]:
        """Everything changed after `since` (all of it when 0) as a blob, and its raw array bytes.

        A copy whose state at `since` matches ours (see `matches`) becomes equal to us by
        `import_state`; that is incremental catch-up. With since == 0 it is a full snapshot.
        """
        if since and since < self.shape_seq:
            since = 0           # keys were removed after `since`: a delta cannot say so, a snapshot can
        arrays: dict[str, np.ndarray] = {}
        names = [n for n in sorted(self.dense) if self.dense_mod[n] > since]
        for n in names:
            arrays[f"d/{n}"] = self.dense[n]
            for k, v in self.dense_slots[n].items():
                arrays[f"ds/{k}/{n}"] = v
        for name, t in self.tables.items():
            arrays.update(t.arrays(f"t/{name}/", since))
        meta = {"full": since == 0, "base_seq": since, "seq": self.seq, "seq_epoch": self.seq_epoch,
                "shard": self.spec.shard, "epochs": self.epochs, "dense": names,
                "dense_steps": {n: self.dense_steps[n] for n in names},
                "dense_mod": {n: self.dense_mod[n] for n in names}, "clocks": self.clocks, "pushes": self.pushes,
                "applied": self.applied.to_json(since), **moving.state_meta(self)}
        return pack(meta, arrays), sum(a.nbytes for a in arrays.values())

    def check_state(self, blob: bytes) -> tuple[dict, dict[str, np.ndarray]]:
        """Unpack a blob from `export_state` (wire or disk) and check all of it against this store
        (pschaos.psnodes.store.statecheck); InvalidArgument names what is wrong, and nothing changed."""
        try:
            meta, arrays = unpack(blob)
        except ValueError as e:
            raise InvalidArgument(f"state: {e}") from None
        check_state(meta, arrays, self.spec.shard, {n: t.dim for n, t in self.tables.items()},
                    self.spec.optimizer.slot_names(), self.spec.limits, self.seq,
                    {n: a.shape for n, a in self.dense.items()})
        return meta, arrays

    def import_state(self, blob: bytes) -> None:
        """Apply a blob from `export_state`: a full snapshot replaces, a delta must start at our seq.
        The whole blob is checked first: a bad one raises InvalidArgument and changes nothing."""
        self._take_state(*self.check_state(blob))

    def _take_state(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        if meta["full"]:
            fresh = ShardStore(self.spec)
            self.__dict__.update({k: v for k, v in fresh.__dict__.items() if k != "spec"})
        slot_names = self.spec.optimizer.slot_names()
        for n in meta["dense"]:
            self.dense[n] = arrays[f"d/{n}"].copy()
            self.dense_slots[n] = {} if is_audit(n) else {k: arrays[f"ds/{k}/{n}"].copy() for k in slot_names}
            self.dense_steps[n] = int(meta["dense_steps"][n])
            self.dense_mod[n] = int(meta["dense_mod"][n])
        for name, t in self.tables.items():
            t.merge(arrays, f"t/{name}/")
        self.clocks = {k: int(v) for k, v in meta["clocks"].items()}
        self.pushes = int(meta["pushes"])
        self.applied.merge_json(meta["applied"])
        self.epochs = [list(e) for e in meta["epochs"]]
        self.seq, self.seq_epoch = int(meta["seq"]), int(meta["seq_epoch"])
        moving.take_meta(self, meta)
        self.log.reset(self.seq, self.seq_epoch)
