"""The versioned key-value state of one shard: dense tensors, embedding tables, optimizer state.

Every applied update gets the shard's next sequence number and lands in the bounded update log.
Application is deterministic, so two copies that applied the same log have the same checksum;
`validate` runs every check before `apply` touches anything, so a bad request changes nothing.
"""
from __future__ import annotations

import hashlib
import io
import json
from dataclasses import dataclass, field

import numpy as np

from .applied import AppliedSet
from .codec import ids_from_pb, rows_from_pb, tensor_from_pb
from .embedding import EmbeddingTable
from .errors import InvalidArgument, NotFound
from .optimizers import OptimizerConfig, apply_update
from .placement import dense_shard, row_shards
from .proto import ps_pb2
from .updatelog import Entry, UpdateLog


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


@dataclass
class Decoded:
    """An update after validation: arrays ready to apply."""

    update: ps_pb2.Update
    dense: list[tuple[str, np.ndarray]]
    sparse: list[tuple[str, np.ndarray, np.ndarray]]


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
        self.seq = 0
        self.seq_epoch = 0
        self.log = UpdateLog(spec.log_entries, spec.log_bytes)

    # ----------------------------------------------------------------- checks
    def validate(self, upd: ps_pb2.Update) -> Decoded:
        """Decode and check an update without changing state; raises InvalidArgument/NotFound."""
        s = self.spec
        dense: list[tuple[str, np.ndarray]] = []
        seen: set[str] = set()
        for t in upd.dense:
            arr = tensor_from_pb(t)
            if t.name in seen:
                raise InvalidArgument(f"dense[{t.name!r}] appears twice in one update; send each name once")
            seen.add(t.name)
            home = dense_shard(t.name, s.num_shards)
            if home != s.shard:
                raise InvalidArgument(f"dense[{t.name!r}] belongs to shard {home}, not shard {s.shard}; "
                                      "route by psnodes.placement.dense_shard")
            if upd.kind == ps_pb2.Update.PUSH:
                if t.name not in self.dense:
                    raise NotFound(f"dense[{t.name!r}] is not initialized on shard {s.shard}; "
                                   "push an INIT update with its initial value first")
                if self.dense[t.name].shape != arr.shape:
                    raise InvalidArgument(f"dense[{t.name!r}].shape={list(arr.shape)} does not match the "
                                          f"parameter's shape {list(self.dense[t.name].shape)}")
            dense.append((t.name, arr))
        sparse: list[tuple[str, np.ndarray, np.ndarray]] = []
        for r in upd.sparse:
            if r.table not in self.tables:
                known = ", ".join(sorted(self.tables)) or "none"
                raise InvalidArgument(f"sparse[{r.table!r}]: unknown table; known tables: {known}")
            if upd.kind != ps_pb2.Update.PUSH:
                raise InvalidArgument(f"sparse[{r.table!r}]: INIT updates take dense tensors only; "
                                      "embedding rows are created on first touch")
            ids, data = rows_from_pb(r, self.tables[r.table].dim)
            homes = row_shards(r.table, ids, s.num_shards)
            if ids.size and (homes != s.shard).any():
                bad = int(ids[homes != s.shard][0])
                raise InvalidArgument(f"sparse[{r.table!r}].ids: id {bad} belongs to shard "
                                      f"{int(row_shards(r.table, np.array([bad]), s.num_shards)[0])}, "
                                      f"not {s.shard}; route by psnodes.placement.row_shards")
            sparse.append((r.table, ids, data))
        if upd.kind == ps_pb2.Update.PUSH and not upd.worker:
            raise InvalidArgument("update.worker is empty; every push names its worker (idempotency key)")
        return Decoded(upd, dense, sparse)

    def is_noop(self, dec: Decoded) -> bool:
        """An INIT whose tensors all exist changes nothing and is not logged."""
        return dec.update.kind == ps_pb2.Update.INIT and all(n in self.dense for n, _ in dec.dense)

    # ---------------------------------------------------------------- mutation
    def apply(self, dec: Decoded, payload: bytes, epoch: int) -> int:
        """Apply a validated update as the next seq and log it. Returns the seq."""
        seq = self.seq + 1
        upd = dec.update
        if upd.kind == ps_pb2.Update.INIT:
            for name, arr in dec.dense:
                if name not in self.dense:
                    self.dense[name] = arr.astype(np.float32, copy=True)
                    self.dense_slots[name] = self.spec.optimizer.new_slots(arr.shape)
                    self.dense_steps[name] = 0
                    self.dense_mod[name] = seq
        else:
            cfg = self.spec.optimizer
            for name, grad in dec.dense:
                self.dense_steps[name] += 1
                apply_update(cfg, self.dense[name], grad, self.dense_slots[name], self.dense_steps[name])
                self.dense_mod[name] = seq
            for table, ids, data in dec.sparse:
                self.tables[table].push(ids, data, seq)
            self.applied.add(upd.worker, upd.req_id, seq)
            if upd.clock >= 0:
                self.clocks[upd.worker] = max(self.clocks.get(upd.worker, 0), upd.clock + 1)
        self.seq, self.seq_epoch = seq, epoch
        self.log.append(Entry(seq, epoch, payload))
        return seq

    def apply_entry(self, e: Entry) -> None:
        """Apply a replicated entry; it must be exactly the next seq."""
        if e.seq != self.seq + 1:
            raise InvalidArgument(f"entry seq {e.seq} does not follow applied seq {self.seq}")
        upd = ps_pb2.Update.FromString(e.payload)
        self.apply(self.validate(upd), e.payload, e.epoch)

    # ------------------------------------------------------------------ reads
    def pull_dense(self, since: int, names: list[str]) -> list[tuple[str, np.ndarray]]:
        """Dense tensors changed after `since` (all of them when since == 0)."""
        wanted = names or sorted(self.dense)
        out = []
        for n in wanted:
            if n not in self.dense:
                raise NotFound(f"names: dense {n!r} is not on shard {self.spec.shard}")
            if self.dense_mod[n] > since:
                out.append((n, self.dense[n].copy()))
        return out

    def pull_rows(self, r: ps_pb2.Rows) -> tuple[np.ndarray, np.ndarray, int]:
        if r.table not in self.tables:
            known = ", ".join(sorted(self.tables)) or "none"
            raise InvalidArgument(f"sparse[{r.table!r}]: unknown table; known tables: {known}")
        ids = ids_from_pb(r)
        t = self.tables[r.table]
        return ids, t.lookup(ids), t.dim

    def min_clock(self) -> int:
        """The slowest expected worker's clock (BSP/SSP waits on it)."""
        if self.spec.workers <= 0:
            return min(self.clocks.values(), default=0)
        return min(self.clocks.get(f"worker-{j}", 0) for j in range(self.spec.workers))

    # -------------------------------------------------------- whole-state views
    def checksum(self) -> str:
        """A digest of parameters, optimizer state and applied keys: equal iff the copies agree."""
        h = hashlib.blake2b(digest_size=16)
        for n in sorted(self.dense):
            h.update(n.encode())
            h.update(self.dense[n].tobytes())
            for s in sorted(self.dense_slots[n]):
                h.update(self.dense_slots[n][s].tobytes())
            h.update(str(self.dense_steps[n]).encode())
        for name in sorted(self.tables):
            self.tables[name].digest(h)
        h.update(json.dumps(self.applied.ranges, sort_keys=True).encode())
        return h.hexdigest()

    def state_bytes(self) -> int:
        """Approximate size of a full snapshot: what a catch-up by snapshot would move."""
        n = sum(a.nbytes + sum(s.nbytes for s in self.dense_slots[k].values()) for k, a in self.dense.items())
        return n + sum(t.nbytes() for t in self.tables.values())

    def snapshot(self) -> bytes:
        """The whole state as one self-describing npz blob (no pickles)."""
        arrays: dict[str, np.ndarray] = {}
        for n, a in self.dense.items():
            arrays[f"d/{n}"] = a
            for s, v in self.dense_slots[n].items():
                arrays[f"ds/{s}/{n}"] = v
        for name, t in self.tables.items():
            arrays.update(t.arrays(f"t/{name}/"))
        meta = {"seq": self.seq, "seq_epoch": self.seq_epoch, "dense_steps": self.dense_steps,
                "dense_mod": self.dense_mod, "clocks": self.clocks, "applied": self.applied.to_json(),
                "shard": self.spec.shard, "dense_names": sorted(self.dense)}
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **{k.replace("/", "|"): v for k, v in arrays.items()})
        return buf.getvalue()

    def restore(self, blob: bytes) -> None:
        """Replace the whole state with a snapshot; the log restarts at the snapshot's seq."""
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            arrays = {k.replace("|", "/"): z[k] for k in z.files}
        meta = json.loads(arrays.pop("meta").tobytes().decode())
        if meta["shard"] != self.spec.shard:
            raise InvalidArgument(f"snapshot is of shard {meta['shard']}, not shard {self.spec.shard}")
        self.dense = {n: arrays[f"d/{n}"].copy() for n in meta["dense_names"]}
        self.dense_slots = {n: {s: arrays[f"ds/{s}/{n}"].copy() for s in self.spec.optimizer.slot_names()}
                            for n in self.dense}
        self.dense_steps = {k: int(v) for k, v in meta["dense_steps"].items()}
        self.dense_mod = {k: int(v) for k, v in meta["dense_mod"].items()}
        for name, t in self.tables.items():
            t.load(arrays, f"t/{name}/")
        self.clocks = {k: int(v) for k, v in meta["clocks"].items()}
        self.applied = AppliedSet.from_json(meta["applied"])
        self.seq, self.seq_epoch = int(meta["seq"]), int(meta["seq_epoch"])
        self.log.reset(self.seq, self.seq_epoch)
