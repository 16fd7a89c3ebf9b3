"""Elastic shards in the twin: psnodes/server/ownership.py's shell for a simulated copy.

Mixed into SimCopy. The checks and the decisions of every step are pschaos.psnodes.server.ownership's own
(`check_push`, `check_pull`, `plan_migrate`, `route_step`, `adoption`, `check_export`,
`export_now`, `export_reply`); this module is only what the real node does around them with its
lock, waits and etcd client, as SimPy generators: a call routed by a newer epoch makes the primary
read the routing record (over its link to etcd) and append a ROUTE entry; a Migrate step appends
its entry as primary and returns once the mode's ack rule holds, so the coordinator
(psnodes/elastic/migration.py, run in virtual time by harness/backends/sim/elastic.py) sees what it sees on
real nodes.

Time: a Migrate handler spends the calibration's `server_request_s` plus `apply_s_per_mb` for
the state it carries in or out, as CPU on the host's shared cores (harness/backends/sim/cpu.py), as every
call a copy serves does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from pschaos.psnodes.server import ownership
from pschaos.psnodes.elastic import routing
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.store import ShardStore

from pschaos.harness.backends.sim.rpc import Gen

if TYPE_CHECKING:
    from pschaos.harness.backends.sim.shard import SimCopy


class MigrateSide:
    """Mixed into SimCopy: routing epochs on calls, and the Migrate handler."""

    def migrate(self: "SimCopy", req: ps_pb2.MigrateRequest, deadline: float) -> Gen:
        """`reply = yield from copy.migrate(req, deadline)`: ShardNode.migrate in virtual time."""
        return (yield from self.serve(lambda: self._migrate(req, deadline), deadline))

    def _migrate(self: "SimCopy", req: ps_pb2.MigrateRequest, deadline: float) -> Gen:
        self._check_shard(req.shard, "Migrate")
        step = ownership.plan_migrate(req)
        yield from self._spend(len(req.state), self.request_s)
        if step.export:
            rep = yield from self._export(req, deadline)
            yield from self._spend(len(rep.state))
            return rep
        if step.route is not None:
            seq = yield from self.adopt(*step.route, deadline)
        else:
            seq = yield from self.append(step.update, deadline, step.still)
            if step.event:
                self.emit(step.event, ownership.step_event(self.shard, req, seq, self.epoch))
        return ownership.step_reply(self.store, seq, self.name)

    def _spend(self: "SimCopy", nbytes: int, per_call: float = 0.0) -> Gen:
        """The handler's CPU time: `per_call`, and per MB of state taken in or sent out."""
        cost = per_call + self.apply_s_per_mb * nbytes / 1e6
        if self.cpu is None:
            if cost > 0:
                yield self.env.timeout(cost)
            return
        yield from self.cpu.use(cost, self.name)

    def _export(self: "SimCopy", req: ps_pb2.MigrateRequest, deadline: float) -> Gen:
        """ownership._export: the moving keys as of a replicated seq (sync mode)."""
        self._check_primary(0)
        epoch = self.epoch
        ownership.check_export(self.store, req, self.name)
        if self.cfg.mode == "sync":
            yield from self._wait_replicated(self.store.seq, epoch, deadline)
        return ownership.export_reply(ownership.export_now(self.store, req), req, self.name)

    def append(self: "SimCopy", upd: ps_pb2.Update, deadline: float,
               still: Callable[[ShardStore], bool] = lambda store: True) -> Gen:
        """ownership.append: one of the shard's own entries, applied as primary, then the ack rule."""
        self._check_primary(0)
        epoch = self.epoch
        if still(self.store):
            dec = self.store.validate(upd)
            seq = self.store.apply(dec, upd.SerializeToString(), epoch)
            self.peer_seq[self.name] = seq
            self.notify()
        seq = self.store.seq
        if self.cfg.mode == "sync":
            yield from self._wait_replicated(seq, epoch, deadline)
        else:
            yield from self._wait_followers(epoch, deadline)
        return seq

    def adopt(self: "SimCopy", epoch: int, shards, deadline: float) -> Gen:
        """ownership.adopt: a ROUTE entry for `epoch` (nothing when the store is there already)."""
        if epoch <= self.store.routing_epoch:
            return self.store.seq
        step = ownership.route_step(epoch, shards)
        return (yield from self.append(step.update, deadline, step.still))

    def sync_routing(self: "SimCopy", caller_epoch: int, deadline: float) -> Gen:
        """ownership.sync_routing: a caller ahead of our routing epoch makes us read and adopt the record."""
        if caller_epoch <= self.store.routing_epoch:
            return
        try:
            rec, _ = yield from self.ecall(lambda: routing.read(self.etcd, self.cfg))
        except Exception as e:  # noqa: BLE001 - no etcd, no proof of the newer routing
            raise ownership.unreadable(self.name, caller_epoch, self.store.routing_epoch, e) from None
        rec = ownership.adoption(self.name, caller_epoch, rec)
        yield from self.adopt(rec.epoch, rec.shards, deadline)


__all__ = ["MigrateSide"]
