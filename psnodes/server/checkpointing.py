"""A shard copy's checkpoints and its restore choice: the Snapshot RPC, the local and the shared
checkpoint writes, the load of its own checkpoint on start, and what a restore takes.

The shared checkpoint is written only by the primary of the current epoch with a live lease, of a
seq every in-sync copy holds (`_may_publish`), so no checkpoint is ahead of the shard's history
and a deposed primary never overwrites its successor's. A layer of ShardNode over Primacy
(primacy.py); the twin's port is harness/backends/sim/copy/checkpoint.py.
"""
from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass

from pschaos.psnodes.server import ownership
from pschaos.psnodes.store.checkpoint import read_checkpoint, write_checkpoint
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core import checkpoints, promotion
from pschaos.psnodes.store import checkpoint as ckpt_records
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.errors import TooLarge
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.server.primacy import Primacy
from pschaos.psnodes.store.store import ShardStore

log = logging.getLogger("psnodes.node")     # the node's logger, under "psnodes" (server/logs.py sets that one up)
VERIFIED = "verified.json"      # beside the local checkpoint: primaries etcd confirmed to this copy


@dataclass
class RestorePlan:
    """What a restore would take, prepared without touching the node: the shared checkpoint's state
    loaded aside (`store`), or None to keep this copy's own state."""

    source: str          # "checkpoint@<seq>" or "local@<seq>"
    seq: int
    seq_epoch: int
    store: ShardStore | None
    loaded: dict | None = None    # the shared checkpoint it took (store.checkpoint.loaded), for the restore event


class Checkpointing(Primacy):
    """A layer of ShardNode: checkpoints, the verified primaries kept beside them, and restore."""

    def snapshot(self, req: ps_pb2.SnapshotRequest) -> dict:
        """The Snapshot RPC: this copy's checkpoint now (the shard's shared one only while etcd
        names it primary: `_may_publish`)."""
        self._check_shard(req.shard, "Snapshot")
        if not self.snapshot_slot.acquire(blocking=False):     # a storm of Snapshots must not queue up
            raise TooLarge(f"{self.name} is already taking a snapshot for another call; retry once it is done")
        try:
            return self.checkpoint()
        finally:
            self.snapshot_slot.release()

    def checkpoint(self, shared: bool | None = None) -> dict:
        """Write the local checkpoint, and the shard's shared one when this node is (still) the
        primary of the current epoch; returns the manifest written, with the folder as `path`.

        The periodic writer and Snapshot calls take turns (one export and write at a time), and
        the shared folder only ever moves forward (pschaos.psnodes.store.checkpoint)."""
        with self.ckpt_lock:
            return self._checkpoint(shared)

    def _checkpoint(self, shared: bool | None) -> dict:
        """The body of `checkpoint`, ckpt_lock held."""
        with self.cond:
            blob, _ = self.store.export_state(0)
            seq, epoch, term, primary = self.store.seq, self.store.seq_epoch, self.epoch, self.role == "primary"
        local = self.cfg.data_dir(self.name)
        man, _ = write_checkpoint(local, blob, seq, epoch, self.name, term=term, newer_only=False)
        self.events.emit("checkpoint-local", ckpt_records.published(self.shard, man))
        self._save_verified(local)
        man = {**man, "path": str(local)}
        if not (shared if shared is not None else primary):
            return man
        why = self._may_publish(seq, term)
        if why:
            self.events.emit("checkpoint-skipped", {"shard": self.shard, "seq": seq, "term": term, "reason": why})
            return man
        folder = self.cfg.checkpoint_dir(self.shard)
        cur, wrote = write_checkpoint(folder, blob, seq, epoch, self.name, term=term)
        if wrote:
            self.events.emit("checkpoint", ckpt_records.published(self.shard, cur))
        if wrote or (cur["seq"], cur.get("term")) == (seq, term):
            man = {**cur, "path": str(folder)}
        return man

    def _may_publish(self, seq: int, term: int) -> str:
        """Why this node may not write the shard's shared checkpoint of `seq` now ('' if it may).

        It must be the primary of `term` with a live lease, `seq` must be on every ISR copy (sync
        mode: then any copy a failover promotes holds it, so the checkpoint is never ahead of the
        shard's history), and etcd must still name it at `term`: a deposed primary that has not
        noticed yet never overwrites the checkpoints of the epoch that took over."""
        deadline = time.monotonic() + min(1.0, self.cfg.rpc_timeout_s)
        with self.cond:
            while True:
                why = checkpoints.publish_refusal(self.is_primary(term), self.lease_valid(), term)
                if why:
                    return why
                if not checkpoints.needs_replication(self.cfg.mode) or self._replicated(seq):
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"seq {seq} is not yet on every in-sync copy"
                self.cond.wait(min(left, 0.05))
        if self.etcd is None:
            return ""          # run without etcd (in-process tests): the role is all there is
        try:
            kv = self.etcd.get(self.cfg.shard_key(self.shard))
        except Exception as e:  # noqa: BLE001 - no etcd, no proof we are still primary
            return f"etcd unreachable: {e}"
        rec = ShardRecord.from_json(kv.value) if kv else None
        return checkpoints.record_refusal(rec.epoch if rec else None, rec.primary if rec else None, term, self.name)

    def load_local(self) -> None:
        """On start: restore this copy's own last checkpoint, if any (it then catches up by delta),
        and the primaries etcd confirmed to it before: who led an epoch never changes, so a copy
        restarted while etcd is down may follow its old primary again, and no one else."""
        folder = self.cfg.data_dir(self.name)
        got = read_checkpoint(folder, on_damage=self._damaged("local checkpoint"))
        if got:
            man, blob = got
            try:
                self.store.import_state(blob)
            except Exception as e:  # noqa: BLE001 - start empty: a snapshot from the primary brings it back
                self.events.emit("checkpoint-error", {"shard": self.shard, "error": f"local checkpoint: {e}"})
                log.error("%s: local checkpoint not loaded: %s", self.name, e)
            else:
                self.events.emit("load", {"shard": self.shard, "seq": man["seq"], "source": "local",
                                          **ckpt_records.loaded(man, blob)})
        try:
            pairs = json.loads((folder / VERIFIED).read_text())
            self.verified |= {(int(e), str(p)) for e, p in pairs}
        except (OSError, ValueError, TypeError):
            pass

    def _damaged(self, what: str):
        """What a read of a damaged checkpoint says: a `checkpoint-error` naming the damage (the
        copy then starts without it: a snapshot from the primary, or the restore's other source)."""
        def say(why: str) -> None:
            self.events.emit("checkpoint-error", {"shard": self.shard, "error": f"{what}: {why}", "damaged": True})
            log.error("%s: %s not loaded: %s", self.name, what, why)
        return say

    def _save_verified(self, folder) -> None:
        """Keep the newest confirmed (epoch, primary) pairs beside the local checkpoint. Not synced,
        on purpose: a cache of etcd's answers; a power cut may leave it empty or old, and
        `load_local` then starts without it and asks etcd again (docs/storage-faults.md)."""
        with self.cond:
            pairs = sorted(self.verified)[-8:]
        tmp = folder / f"{VERIFIED}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(pairs))
        os.replace(tmp, folder / VERIFIED)

    def plan_restore(self) -> RestorePlan:
        """Every ISR copy is lost: the shard's shared checkpoint when it is newer than this copy by
        (epoch of the last entry, seq), as in Raft's up-to-date rule, else this copy's own state.

        Nothing changes here: the restore may still lose its compare-and-swap in etcd, and a
        copy that lost it must keep the state it has (`adopt_restore` is for the winner)."""
        with self.cond:
            mine = promotion.Position(self.store.seq_epoch, self.store.seq)
        got = read_checkpoint(self.cfg.checkpoint_dir(self.shard), on_damage=self._damaged("restore"))
        ckpt = promotion.Position(int(got[0].get("epoch", 0)), int(got[0]["seq"])) if got else None
        if promotion.restore_from_checkpoint(mine, ckpt):
            aside = ShardStore(self.store.spec)
            try:
                aside.import_state(got[1])
            except Exception as e:  # noqa: BLE001 - a checkpoint that does not load is not restored
                self.events.emit("checkpoint-error", {"shard": self.shard, "error": f"restore: {e}"})
            else:
                return RestorePlan(f"checkpoint@{aside.seq}", aside.seq, aside.seq_epoch, aside,
                                   ckpt_records.loaded(*got))
        return RestorePlan(f"local@{mine.seq}", mine.seq, mine.seq_epoch, None)

    def adopt_restore(self, plan: RestorePlan, routing_rec: Routing, epoch: int) -> None:
        """This copy won the restore's compare-and-swap at `epoch`: take the planned state, then the
        routing record the swap compared (ownership.restore_routing), before it serves as primary."""
        with self.cond:
            if plan.store is not None:
                self.store = plan.store
            self.restored_from = plan.source
            evs = ownership.restore_routing(self.store, routing_rec, epoch)
            self.metrics.seq.set(self.store.seq)
        for f, v in evs:
            self.events.emit(f, v)
