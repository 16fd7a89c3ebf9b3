"""Elastic shards in the twin: psnodes/server/ownership.py's shell for a simulated copy.

The copy (copy.py) owns one MigrateSide, which sees it as state.py's CopyState. The checks and
the decisions of every step are pschaos.psnodes.server.ownership's own
(`check_push`, `check_pull`, `plan_migrate`, `route_step`, `adoption`, `check_export`,
`export_now`, `export_reply`); this module is only what the real node does around them with its
lock, waits and etcd client, as SimPy generators: a call routed by a newer epoch makes the primary
read the routing record (over its link to etcd) and append a ROUTE entry; a Migrate step appends
its entry as primary and returns once the mode's ack rule holds (acks.py), so the coordinator
(psnodes/elastic/migration.py, run in virtual time by harness/backends/sim/elastic.py) sees what it sees on
real nodes.

Time: a Migrate handler spends the calibration's `server_request_s` plus `apply_s_per_mb` for
the state it carries in or out, as CPU on the host's shared cores (harness/backends/sim/cpu.py), as every
call a copy serves does.
"""
from __future__ import annotations

from typing import Callable

from pschaos.psnodes.server import ownership
from pschaos.psnodes.elastic import routing
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.store import ShardStore

from pschaos.harness.backends.sim.rpc import Gen
from pschaos.harness.backends.sim.copy import acks
from pschaos.harness.backends.sim.copy.state import CopyState


class MigrateSide:
    """The copy `c`'s routing epochs on calls, and its Migrate handler."""

    def __init__(self, c: CopyState) -> None:
        self.c = c

    def migrate(self, req: ps_pb2.MigrateRequest, deadline: float) -> Gen:
        """`reply = yield from copy.migrate(req, deadline)`: ShardNode.migrate in virtual time."""
        return (yield from self.c.serve(lambda: self._migrate(req, deadline), deadline))

    def _migrate(self, req: ps_pb2.MigrateRequest, deadline: float) -> Gen:
        c = self.c
        c.check_shard(req.shard, "Migrate")
        step = ownership.plan_migrate(req)
        yield from self._spend(len(req.state), c.request_s)
        if step.export:
            rep = yield from self._export(req, deadline)
            yield from self._spend(len(rep.state))
            return rep
        if step.route is not None:
            seq = yield from self.adopt(*step.route, deadline)
        else:
            seq = yield from self.append(step.update, deadline, step.still)
            if step.event:
                c.emit(step.event, ownership.step_event(c.shard, req, seq, c.epoch, c.store))
        return ownership.step_reply(c.store, seq, c.name)

    def _spend(self, nbytes: int, per_call: float = 0.0) -> Gen:
        """The handler's CPU time: `per_call`, and per MB of state taken in or sent out."""
        c = self.c
        cost = per_call + c.apply_s_per_mb * nbytes / 1e6
        if c.cpu is None:
            if cost > 0:
                yield c.env.timeout(cost)
            return
        yield from c.cpu.use(cost, c.name)

    def _export(self, req: ps_pb2.MigrateRequest, deadline: float) -> Gen:
        """ownership._export: the moving keys as of a replicated seq (sync mode)."""
        c = self.c
        c.check_primary(0)
        epoch = c.epoch
        ownership.check_export(c.store, req, c.name)
        x = ownership.export_now(c.store, req)
        if c.cfg.mode == "sync":
            yield from acks.wait_replicated(c, x.seq, epoch, deadline)    # a read index (ownership._export)
        return ownership.export_reply(x, req, c.name)

    def append(self, upd: ps_pb2.Update, deadline: float,
               still: Callable[[ShardStore], bool] = lambda store: True) -> Gen:
        """ownership.append: one of the shard's own entries, applied as primary, then the ack rule."""
        c = self.c
        c.check_primary(0)
        epoch = c.epoch
        if still(c.store):
            dec = c.store.validate(upd)
            seq = c.store.apply(dec, upd.SerializeToString(), epoch)
            c.peer_seq[c.name] = seq
            c.notify()
        seq = c.store.seq
        if c.cfg.mode == "sync":
            yield from acks.wait_replicated(c, seq, epoch, deadline)
        else:
            yield from acks.wait_followers(c, epoch, deadline)
        return seq

    def adopt(self, epoch: int, shards, deadline: float) -> Gen:
        """ownership.adopt: a ROUTE entry for `epoch` (nothing when the store is there already)."""
        c = self.c
        if epoch <= c.store.routing_epoch:
            return c.store.seq
        step = ownership.route_step(epoch, shards)
        return (yield from self.append(step.update, deadline, step.still))

    def sync_routing(self, caller_epoch: int, deadline: float) -> Gen:
        """ownership.sync_routing: a caller ahead of our routing epoch makes us read and adopt the record."""
        c = self.c
        if caller_epoch <= c.store.routing_epoch:
            return
        try:
            rec, _ = yield from c.ecall(lambda: routing.read(c.etcd, c.cfg))
        except Exception as e:  # noqa: BLE001 - no etcd, no proof of the newer routing
            raise ownership.unreadable(c.name, caller_epoch, c.store.routing_epoch, e) from None
        rec = ownership.adoption(c.name, caller_epoch, rec)
        yield from self.adopt(rec.epoch, rec.shards, deadline)


__all__ = ["MigrateSide"]
