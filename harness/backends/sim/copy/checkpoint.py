"""A simulated copy's checkpoints and restore choice: psnodes/server/checkpointing.py's checkpoint, _may_publish,
load_local, plan_restore and adopt_restore, on the simulated disk (harness/backends/sim/disk.py).

Same decisions from pschaos.psnodes.core.checkpoints and pschaos.psnodes.core.promotion, same events. Where the
real node holds `ckpt_lock` (one export and write at a time) the copy holds a SimPy resource;
where it waits on its condition variable it waits for a change in virtual time. Reading a
checkpoint takes no virtual time (a node reads one only at start and when it restores).

The copy (copy.py) owns its CopyCheckpoints, which see it as state.py's CopyState: the elector
and serve.py reach them through the copy's own `checkpoint`, `load_local`, `plan_restore` and
`adopt_restore`, never by importing this module's owner.
"""
from __future__ import annotations

import json

from pschaos.psnodes.server import ownership
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core import checkpoints, promotion
from pschaos.psnodes.store import checkpoint as ckpt_records
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.errors import InvalidArgument
from pschaos.psnodes.server.checkpointing import VERIFIED
from pschaos.psnodes.store.store import ShardStore

from pschaos.harness.backends.sim.disk import local_dir, shared_dir
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.harness.backends.sim.copy import acks
from pschaos.harness.backends.sim.copy.state import CopyState
from pschaos.harness.backends.sim.copy.values import RestorePlan


class CopyCheckpoints:
    """The copy `c`'s checkpoint writes, its start from disk and its restore plan."""

    def __init__(self, c: CopyState) -> None:
        self.c = c

    def checkpoint(self, shared: bool | None = None) -> Gen:
        """`man = yield from copy.checkpoint()`: ShardNode.checkpoint. The local checkpoint, then
        the shard's shared one while the copy is (still) the primary of the current epoch."""
        c = self.c
        with c.ckpt_lock.request() as turn:
            yield turn
            blob, _ = c.store.export_state(0)
            seq, epoch, term, primary = c.store.seq, c.store.seq_epoch, c.epoch, c.role == "primary"
            local = local_dir(c.name)
            man, _ = yield from c.disk.write(local, blob, seq, epoch, c.name, term=term, newer_only=False,
                                             writer=c.writer_tag())
            c.emit("checkpoint-local", ckpt_records.published(c.shard, man))
            self._save_verified(local)
            man = {**man, "path": local}
            if not (shared if shared is not None else primary):
                return man
            why = yield from self._may_publish(seq, term)
            if why:
                c.emit("checkpoint-skipped", {"shard": c.shard, "seq": seq, "term": term, "reason": why})
                return man
            folder = shared_dir(c.shard)
            cur, wrote = yield from c.disk.write(folder, blob, seq, epoch, c.name, term=term,
                                                 writer=c.writer_tag())
            if wrote:
                c.emit("checkpoint", ckpt_records.published(c.shard, cur))
            if wrote or (cur["seq"], cur.get("term")) == (seq, term):
                man = {**cur, "path": folder}
            return man

    def _may_publish(self, seq: int, term: int) -> Gen:
        """Why the copy may not write the shard's shared checkpoint of `seq` now ('' if it may):
        primary of `term` under a live lease, `seq` on every ISR copy (sync mode, waited for up to
        min(1, rpc_timeout_s)), and etcd's record still naming it at `term`."""
        c = self.c
        deadline = c.now() + min(1.0, c.cfg.rpc_timeout_s)
        while True:
            why = checkpoints.publish_refusal(c.is_primary(term), c.lease_valid(), term)
            if why:
                return why
            if not checkpoints.needs_replication(c.cfg.mode) or acks.replicated(c, seq):
                break
            left = deadline - c.now()
            if left <= 0:
                return f"seq {seq} is not yet on every in-sync copy"
            yield from c.wait_change(min(left, 0.05))
        try:
            kv = yield from c.ecall(lambda: c.etcd.get(c.cfg.shard_key(c.shard)))
        except Exception as e:  # noqa: BLE001 - no etcd, no proof we are still primary
            return f"etcd unreachable: {e}"
        rec = ShardRecord.from_json(kv.value) if kv else None
        return checkpoints.record_refusal(rec.epoch if rec else None, rec.primary if rec else None, term, c.name)

    def load_local(self) -> None:
        """ShardNode.load_local: the copy's own last checkpoint, if any (it then catches up by
        delta), and the (epoch, primary) pairs etcd confirmed to it before."""
        c = self.c
        folder = local_dir(c.name)
        got = c.disk.read(folder, on_damage=self._damaged("local checkpoint"))
        if got:
            man, blob = got
            try:
                c.store.import_state(blob)
            except InvalidArgument as e:      # start empty: a snapshot from the primary brings it back
                c.emit("checkpoint-error", {"shard": c.shard, "error": f"local checkpoint: {e}"})
            else:
                c.emit("load", {"shard": c.shard, "seq": man["seq"], "source": "local", **ckpt_records.loaded(man, blob)})
        try:
            pairs = json.loads(c.disk.get(folder, VERIFIED) or b"")
            c.verified |= {(int(e), str(p)) for e, p in pairs}
        except (ValueError, TypeError):
            pass

    def _damaged(self, what: str):
        """ShardNode._damaged: a damaged checkpoint is said in a `checkpoint-error`, not taken."""
        def say(why: str) -> None:
            self.c.emit("checkpoint-error", {"shard": self.c.shard, "error": f"{what}: {why}", "damaged": True})
        return say

    def _save_verified(self, folder: str) -> None:
        """The newest confirmed (epoch, primary) pairs beside the local checkpoint."""
        self.c.disk.put(folder, VERIFIED, json.dumps(sorted(self.c.verified)[-8:]).encode())

    def plan_restore(self) -> RestorePlan:
        """ShardNode.plan_restore: the shared checkpoint when it is newer than the copy by (epoch
        of the last entry, seq), else the copy's own state; nothing changes here."""
        c = self.c
        mine = promotion.Position(c.store.seq_epoch, c.store.seq)
        got = c.disk.read(shared_dir(c.shard), on_damage=self._damaged("restore"))
        ckpt = promotion.Position(int(got[0].get("epoch", 0)), int(got[0]["seq"])) if got else None
        if promotion.restore_from_checkpoint(mine, ckpt):
            aside = ShardStore(c.store.spec)
            try:
                aside.import_state(got[1])
            except Exception as e:  # noqa: BLE001 - a checkpoint that does not load is not restored
                c.emit("checkpoint-error", {"shard": c.shard, "error": f"restore: {e}"})
            else:
                return RestorePlan(f"checkpoint@{aside.seq}", aside.seq, aside.seq_epoch, aside, ckpt_records.loaded(*got))
        return RestorePlan(f"local@{mine.seq}", mine.seq, mine.seq_epoch, None)

    def adopt_restore(self, plan: RestorePlan, routing_rec: Routing, epoch: int) -> None:
        """ShardNode.adopt_restore: take the planned state, then the routing record the swap compared."""
        c = self.c
        if plan.store is not None:
            c.store = plan.store
        c.restored_from = plan.source
        for f, v in ownership.restore_routing(c.store, routing_rec, epoch):
            c.emit(f, v)


__all__ = ["CopyCheckpoints"]
