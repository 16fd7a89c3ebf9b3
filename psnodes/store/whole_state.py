"""The whole state of a shard at once: its checksum and size, its history's epochs, and the blob
that a snapshot, a catch-up delta or a checkpoint carries (export, check, import).

Copies compare checksums to prove they agree, and a replica catches up from a blob; a blob is
checked whole (pschaos.psnodes.store.statecheck) before any of it is taken. A part of ShardStore
(store.py), over ShardState's fields.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from pschaos.psnodes.store import moving
from pschaos.psnodes.store.blob import pack, unpack
from pschaos.psnodes.store.state import ShardState
from pschaos.psnodes.core import logmatch
from pschaos.psnodes.errors import InvalidArgument
from pschaos.psnodes.placement import is_audit
from pschaos.psnodes.store.statecheck import check_state


class WholeState(ShardState):
    """A part of ShardStore: the views and blobs of its whole state."""

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
            fresh = ShardState(self.spec)        # a new copy's fields (ShardStore adds none)
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
