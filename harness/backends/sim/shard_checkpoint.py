"""A simulated copy's checkpoints and restore choice: psnodes/server/checkpointing.py's checkpoint, _may_publish,
load_local, plan_restore and adopt_restore, on the simulated disk (harness/backends/sim/disk.py).

Same decisions from pschaos.psnodes.core.checkpoints and pschaos.psnodes.core.promotion, same events. Where the
real node holds `ckpt_lock` (one export and write at a time) the copy holds a SimPy resource;
where it waits on its condition variable it waits for a change in virtual time. Reading a
checkpoint takes no virtual time (a node reads one only at start and when it restores).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pschaos.psnodes.server import ownership
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core import checkpoints, promotion
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.errors import InvalidArgument
from pschaos.psnodes.server.checkpointing import VERIFIED
from pschaos.psnodes.store.store import ShardStore

from pschaos.harness.backends.sim.disk import local_dir, shared_dir
from pschaos.harness.backends.sim.rpc import Gen

if TYPE_CHECKING:
    from pschaos.harness.backends.sim.shard import SimCopy


@dataclass
class RestorePlan:
    """pschaos.psnodes.server.checkpointing.RestorePlan: the shared checkpoint loaded aside (`store`), or None to keep ours."""

    source: str          # "checkpoint@<seq>" or "local@<seq>"
    seq: int
    seq_epoch: int
    store: ShardStore | None


class CopyCheckpoints:
    """Mixed into SimCopy: its checkpoint writes, its start from disk and its restore plan."""

    def checkpoint(self: "SimCopy", shared: bool | None = None) -> Gen:
        """`man = yield from copy.checkpoint()`: ShardNode.checkpoint. The local checkpoint, then
        the shard's shared one while this copy is (still) the primary of the current epoch."""
        with self.ckpt_lock.request() as turn:
            yield turn
            blob, _ = self.store.export_state(0)
            seq, epoch, term, primary = self.store.seq, self.store.seq_epoch, self.epoch, self.role == "primary"
            local = local_dir(self.name)
            man, _ = yield from self.disk.write(local, blob, seq, epoch, self.name, term=term, newer_only=False,
                                                writer=self.writer_tag())
            self._save_verified(local)
            man = {**man, "path": local}
            if not (shared if shared is not None else primary):
                return man
            why = yield from self._may_publish(seq, term)
            if why:
                self.emit("checkpoint-skipped", {"shard": self.shard, "seq": seq, "term": term, "reason": why})
                return man
            folder = shared_dir(self.shard)
            cur, wrote = yield from self.disk.write(folder, blob, seq, epoch, self.name, term=term,
                                                    writer=self.writer_tag())
            if wrote:
                self.emit("checkpoint", {"shard": self.shard, "seq": seq, "epoch": epoch, "term": term,
                                         "bytes": len(blob), "written": cur["time"]})
            if wrote or (cur["seq"], cur.get("term")) == (seq, term):
                man = {**cur, "path": folder}
            return man

    def _may_publish(self: "SimCopy", seq: int, term: int) -> Gen:
        """Why this copy may not write the shard's shared checkpoint of `seq` now ('' if it may):
        primary of `term` under a live lease, `seq` on every ISR copy (sync mode, waited for up to
        min(1, rpc_timeout_s)), and etcd's record still naming it at `term`."""
        deadline = self.now() + min(1.0, self.cfg.rpc_timeout_s)
        while True:
            why = checkpoints.publish_refusal(self.is_primary(term), self.lease_valid(), term)
            if why:
                return why
            if not checkpoints.needs_replication(self.cfg.mode) or self.replicated(seq):
                break
            left = deadline - self.now()
            if left <= 0:
                return f"seq {seq} is not yet on every in-sync copy"
            yield from self.wait_change(min(left, 0.05))
        try:
            kv = yield from self.ecall(lambda: self.etcd.get(self.cfg.shard_key(self.shard)))
        except Exception as e:  # noqa: BLE001 - no etcd, no proof we are still primary
            return f"etcd unreachable: {e}"
        rec = ShardRecord.from_json(kv.value) if kv else None
        return checkpoints.record_refusal(rec.epoch if rec else None, rec.primary if rec else None, term, self.name)

    def load_local(self: "SimCopy") -> None:
        """ShardNode.load_local: this copy's own last checkpoint, if any (it then catches up by
        delta), and the (epoch, primary) pairs etcd confirmed to it before."""
        folder = local_dir(self.name)
        got = self.disk.read(folder)
        if got:
            man, blob = got
            try:
                self.store.import_state(blob)
            except InvalidArgument as e:      # start empty: a snapshot from the primary brings it back
                self.emit("checkpoint-error", {"shard": self.shard, "error": f"local checkpoint: {e}"})
            else:
                self.emit("load", {"shard": self.shard, "seq": man["seq"], "source": "local"})
        try:
            pairs = json.loads(self.disk.get(folder, VERIFIED) or b"")
            self.verified |= {(int(e), str(p)) for e, p in pairs}
        except (ValueError, TypeError):
            pass

    def _save_verified(self: "SimCopy", folder: str) -> None:
        """The newest confirmed (epoch, primary) pairs beside the local checkpoint."""
        self.disk.put(folder, VERIFIED, json.dumps(sorted(self.verified)[-8:]).encode())

    def plan_restore(self: "SimCopy") -> RestorePlan:
        """ShardNode.plan_restore: the shared checkpoint when it is newer than this copy by (epoch
        of the last entry, seq), else this copy's own state; nothing changes here."""
        mine = promotion.Position(self.store.seq_epoch, self.store.seq)
        got = self.disk.read(shared_dir(self.shard))
        ckpt = promotion.Position(int(got[0].get("epoch", 0)), int(got[0]["seq"])) if got else None
        if promotion.restore_from_checkpoint(mine, ckpt):
            aside = ShardStore(self.store.spec)
            try:
                aside.import_state(got[1])
            except Exception as e:  # noqa: BLE001 - a checkpoint that does not load is not restored
                self.emit("checkpoint-error", {"shard": self.shard, "error": f"restore: {e}"})
            else:
                return RestorePlan(f"checkpoint@{aside.seq}", aside.seq, aside.seq_epoch, aside)
        return RestorePlan(f"local@{mine.seq}", mine.seq, mine.seq_epoch, None)

    def adopt_restore(self: "SimCopy", plan: RestorePlan, routing_rec: Routing, epoch: int) -> None:
        """ShardNode.adopt_restore: take the planned state, then the routing record the swap compared."""
        if plan.store is not None:
            self.store = plan.store
        self.restored_from = plan.source
        for f, v in ownership.restore_routing(self.store, routing_rec, epoch):
            self.emit(f, v)


__all__ = ["CopyCheckpoints", "RestorePlan"]
