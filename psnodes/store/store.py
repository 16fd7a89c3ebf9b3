"""The versioned key-value state of one shard: dense tensors, embedding tables, optimizer state.

Every applied update gets the shard's next sequence number and lands in the bounded update log.
Application is deterministic, so two copies that applied the same log have the same checksum;
`validate` runs every check before `apply` touches anything, so a bad request changes nothing.
The audit tensor `__audit__/<shard>` is the exception to the optimizer: plain SGD with lr 1 and
no slots, so its value counts applied pushes exactly, whatever the cluster trains with.

ShardStore is composed of parts over one set of fields (state.py: ShardSpec, ShardState): the
checks of an update (checks.py), the reads (reads.py), the whole-state views and blobs
(whole_state.py), and elastic shards' ownership and migrations (moving.py). This module holds
what changes the state: `apply`, and a replica's taking of what its primary sent.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from pschaos.psnodes.store import moving
from pschaos.psnodes.store.applied import idem_key
from pschaos.psnodes.store.checks import Decoded, UpdateChecks
from pschaos.psnodes.store.reads import ShardReads
from pschaos.psnodes.store.whole_state import WholeState
from pschaos.psnodes.core import fencing, gating
from pschaos.psnodes.errors import InvalidArgument, NotFound
from pschaos.psnodes.store.optimizers import stepped
from pschaos.psnodes.placement import is_audit
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.updatelog import Entry
from pschaos.psnodes.wire.wire import parse


class ShardStore(UpdateChecks, ShardReads, WholeState):
    """One shard copy's versioned state (ShardState's fields) with every part's behaviour; this
    class adds the mutations, which use them all (validate, apply, check and take a state blob)."""

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
