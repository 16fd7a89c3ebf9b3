"""A simulated shard copy: the real ShardStore and pschaos.psnodes.core's decisions, in virtual time.

This is psnodes/server/node.py's second shell. Where the real node holds a lock and a condition
variable, a copy here is only touched by one SimPy process at a time, and "notify" is an event
that waiting processes yield on (`_changed`). Every decision is the core's. Here: state, roles,
the lease bound, and the Push, Pull and Status handlers. Owned by the copy and reached through
it: process control and the calls' server side (process.ProcessControl), the Replicate handler
(replication.ReplicaSide), checkpoints (checkpoint.CopyCheckpoints), and elastic shards' routing
epochs and Migrate handler (migrate.MigrateSide); the ack rule's waits are acks.py's. The
processes that drive a copy (serve.py: procs.py, with replication.py's senders, election.py and
members.py) hold it from outside.

Composition runs one way: this module imports its sides, and they see the copy only as
state.py's CopyState, so none of them imports this one.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import simpy

from pschaos.psnodes.server import ownership
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.core import dedup, fencing, lease, membership
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.store.digest import dense_digest, wants_digest
from pschaos.psnodes.store.moving import owned_dense
from pschaos.psnodes.server.primacy import promote_event
from pschaos.psnodes.errors import InvalidArgument, NotPrimary, Timeout
from pschaos.psnodes.membership.members import view_event
from pschaos.psnodes.placement import parse_node_name
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.state import ShardSpec
from pschaos.psnodes.store.store import ShardStore
from pschaos.psnodes.wire.wire import committed_field, encode_pull_reply

from pschaos.harness.backends.sim.clock import SimClock
from pschaos.harness.backends.sim.cpu import SimCPU, use
from pschaos.harness.backends.sim.disk import SimDisk
from pschaos.harness.backends.sim.etcd import SimEtcd
from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.rpc import Gen, SimHistory, etcd_call
from pschaos.harness.backends.sim.copy import acks
from pschaos.harness.backends.sim.copy.checkpoint import CopyCheckpoints
from pschaos.harness.backends.sim.copy.migrate import MigrateSide
from pschaos.harness.backends.sim.copy.process import ProcessControl
from pschaos.harness.backends.sim.copy.replication import ReplicaSide
from pschaos.harness.backends.sim.copy.status import final_state_of, status_reply
from pschaos.harness.backends.sim.copy.values import ClientWatch, ReplicateReq, RestorePlan, client_watch

NODE_ETCD_TIMEOUT_S = 0.5     # psnodes/serve.py: Etcd(..., timeout=0.5)


class SimCopy:
    """One copy `shard-<i>/<r>`: store, role, ISR and lease bound, its RPC handlers, its disk."""

    def __init__(self, env: simpy.Environment, clock: SimClock, etcd: SimEtcd, net: SimNetwork,
                 cfg: ClusterConfig, name: str, history: SimHistory, disk: SimDisk | None = None) -> None:
        self.env, self.clock, self.etcd, self.net, self.cfg, self.name = env, clock, etcd, net, cfg, name
        self.history = history
        self.disk = disk or SimDisk.of(env, clock)
        self.shard, self.slot = parse_node_name(name)
        self.incarnation = 1
        self.session = 0
        self.alive = True
        self.paused = False
        self.procs: list[simpy.Process] = []
        self.on_promote: Callable[[], None] = lambda: None          # procs.py: start senders
        self.start_delay_s = 0.0    # calibration node_start_s: a (re)start's time until it serves
        self.teardown_s = 0.0       # calibration kill_teardown_s: a SIGKILL until its sockets close
        self.closed_at = 0.0        # when the last kill's sockets close (rpc.refused)
        # the host's cores (harness/backends/sim/cpu.py; None: costs are not charged) and the calibration's
        # CPU per call served (server_request_s, plus apply_s_per_mb for the bytes it carries), per
        # Replicate served (replicate_request_s plus replicate_s_per_mb) and per Replicate sent
        # (replicate_send_s: a primary's senders)
        self.cpu: SimCPU | None = None
        self.request_s, self.apply_s_per_mb = 0.0, 0.0
        self.replicate_s, self.replicate_s_per_mb, self.send_s = 0.0, 0.0, 0.0
        # what a real copy's process spends beyond those (calibration push_cpu_extra_s and
        # replicate_cpu_extra_s): a primary's per push it applies, a replica's per Replicate that
        # carries entries
        self.push_extra_s, self.replicate_extra_s = 0.0, 0.0
        # and what its process spends a second while it lives, whatever it serves (calibration
        # copy_idle_cpu_s: gRPC's and its own threads beyond the heartbeats and keepalives modelled)
        self.idle_cpu_s = 0.0
        self.replicate_load = [0, 0]    # Replicates served that carried entries, and their entries
        self.call_apply_cpu = True      # pushes charge apply_s_per_mb (False: a pre-CPU-model calibration)
        self.on_start: Callable[[], None] = lambda: None            # procs.py: serve.py's start
        self.on_stop: Callable[[float], simpy.Event] | None = None    # procs.py: serve.py's SIGTERM
        # its sides: each holds the copy (as state.py's CopyState) and no state of its own that
        # a restart would have to renew, so they live as long as the copy
        self.control = ProcessControl(self)
        self.replica = ReplicaSide(self)
        self.checkpoints = CopyCheckpoints(self)
        self.migration = MigrateSide(self)
        self.fresh()

    def fresh(self) -> None:
        """A new process's state, as ShardNode.__init__ sets it."""
        cfg = self.cfg
        self.store = ShardStore(ShardSpec(
            shard=self.shard, num_shards=cfg.shards, tables=dict(cfg.tables),
            optimizer=cfg.optimizer_config(), seed=cfg.seed, workers=cfg.workers,
            log_entries=cfg.log_entries, limits=cfg.request_limits()))
        self.role, self.epoch, self.primary = "starting", 0, ""
        self.isr: list[str] = []
        self.epoch_start = 0
        self.last_heard = self.env.now
        self.in_sync = False
        self.peer_seq: dict[str, int] = {}
        self.peer_heard: dict[str, float] = {}
        self.detector = cfg.failure_detector()      # as ShardNode: the replica's failure detector
        self.suspecting = 0
        self.members: membership.Record | None = None      # the BSP/SSP gate's generation (members.py)
        self.verified: set[tuple[int, str]] = set()   # (epoch, primary) pairs etcd's record confirmed
        self.lease = 0
        self.lease_until = math.inf
        self.lease_seen = math.inf
        self.restored_from = ""
        self.started = False        # serve.py installed its SIGTERM handler ("start" was emitted)
        self.stopping = False       # SIGTERM received: the periodic checkpoint loop ends
        self.accepting = True       # the gRPC server takes new calls
        self.answering = True       # calls in flight may still be answered (server.stop's grace)
        self.done = self.env.event()
        self.ckpt_lock = simpy.Resource(self.env, capacity=1)
        self.isr_lock = simpy.Resource(self.env, capacity=1)    # ReplicationManager.isr_lock
        self._changed = self.env.event()

    # ------------------------------------------------------------ plumbing
    def now(self) -> float:
        return self.clock.monotonic()

    def emit(self, f: str, value: dict, type_: str = "info") -> None:
        self.history.record(f, value, type_, node=self.name)

    def notify(self) -> None:
        """The condition variable's notify_all: wake every process waiting on a change."""
        ev, self._changed = self._changed, self.env.event()
        ev.succeed()

    def wait_change(self, timeout: float) -> Gen:
        """`yield from copy.wait_change(t)`: until notified or `t` virtual seconds passed."""
        yield self._changed | self.env.timeout(max(0.0, timeout))

    def work_of(self, nbytes: int) -> float:
        """The CPU seconds a call carrying `nbytes` in costs the handler: server_request_s plus
        apply_s_per_mb for its bytes."""
        return self.request_s + (self.apply_s_per_mb * nbytes / 1e6 if self.call_apply_cpu else 0.0)

    def replicate_work(self, nbytes: int) -> float:
        """The CPU seconds a Replicate carrying `nbytes` costs the replica's handler."""
        return self.replicate_s + self.replicate_s_per_mb * nbytes / 1e6

    def writer_tag(self) -> str:
        """What stands for pid and thread in this copy's temporary file names."""
        return f"{self.name.replace('/', '-')}.{self.incarnation}"

    def ecall(self, fn: Callable[[], Any], timeout: float = NODE_ETCD_TIMEOUT_S) -> Gen:
        """One etcd call over this copy's link to etcd, with serve.py's client timeout unless the
        call names its own (as election.py's grant and keepalive do)."""
        return (yield from etcd_call(self.net, self.env, self.name, fn, timeout=timeout, server=self.etcd))

    # ------------------------------------------------------------ membership
    def adopt_members(self, rec: membership.Record) -> None:
        """ShardNode.adopt_members: gate by a newer generation from now on."""
        if not membership.newer(rec, self.members):
            return
        self.members = rec
        self.notify()
        self.emit("member-view", view_event(self.shard, rec))

    # ------------------------------------------------------------ roles
    def is_primary(self, epoch: int | None = None) -> bool:
        return self.alive and self.role == "primary" and (epoch is None or self.epoch == epoch)

    def become_primary(self, rec: ShardRecord, bootstrap: bool = False) -> None:
        self.role, self.epoch, self.primary = "primary", rec.epoch, self.name
        self.verified.add((rec.epoch, self.name))
        self.in_sync = True
        self.isr, self.epoch_start = list(rec.isr), rec.start_seq
        self.peer_seq = {self.name: self.store.seq}
        self.peer_heard = {}
        self.notify()
        self.emit("promote", promote_event(self.shard, rec, self.name, self.store.seq, bootstrap))
        self.on_promote()

    def follow(self, epoch: int, primary: str, epoch_start: int) -> None:
        """Adopt a (newer) primary; a primary that sees a higher epoch steps down (its senders
        stop on their own: they run only while `is_primary(their epoch)`)."""
        was_primary = self.role == "primary"
        if (epoch, primary) != (self.epoch, self.primary):
            self.detector.restart()      # a new stream: its first call starts no gap
        self.role, self.epoch, self.primary, self.epoch_start = "replica", epoch, primary, epoch_start
        if primary:             # as in node.py: every caller took the pair from etcd or had it confirmed
            self.verified.add((epoch, primary))
        self.last_heard = self.now()
        self.notify()
        if was_primary:
            self.emit("step-down", {"shard": self.shard, "epoch": epoch, "primary": primary})

    def fenced(self, reason: str) -> Gen:
        """A replica refused us: re-read the route and step down."""
        try:
            kv = yield from self.ecall(lambda: self.etcd.get(self.cfg.shard_key(self.shard)))
            rec = ShardRecord.from_json(kv.value) if kv else None
        except Exception:  # noqa: BLE001 - etcd unreachable: step down with no known primary
            rec = None
        if self.role != "primary":
            return
        if fencing.deposed_by(rec.epoch if rec is not None else None, self.epoch):
            self.follow(rec.epoch, rec.primary, rec.start_seq)
        else:
            self.follow(self.epoch, "", self.epoch_start)
        self.emit("fenced", {"shard": self.shard, "reason": reason})

    # ------------------------------------------------------------ lease
    def renew_lease(self, sent: float, ttl: float) -> None:
        self.lease_until = lease.renewed(self.lease_until, sent, ttl, self.cfg.lease_margin_s)
        self.lease_seen = self.now()
        self.notify()

    def lease_valid(self) -> bool:
        return lease.valid(self.now(), self.lease_until)

    def lease_lost(self, reason: str) -> bool:
        if self.role != "primary":
            return False
        self.follow(self.epoch, "", self.epoch_start)
        self.emit("lease-lost", {"shard": self.shard, "epoch": self.epoch, "reason": reason})
        return True

    def check_lease(self) -> None:
        if not self.lease_valid():
            raise NotPrimary(f"{self.name} could not renew its etcd lease in time: it stopped serving shard "
                             f"{self.shard} so that no other copy is restored while it acks; retry")

    def check_shard(self, shard: int, method: str) -> None:
        if shard != self.shard:
            raise InvalidArgument(f"{method}: shard={shard} but {self.name} serves shard {self.shard}; "
                                  "route by the shard record in etcd")

    def check_primary(self, client_epoch: int) -> None:
        why = fencing.serve_refusal_words(self.name, self.shard, self.role, self.epoch, self.primary, client_epoch)
        if why:
            raise NotPrimary(why)
        self.check_lease()

    # ------------------------------------------------------------ its sides, as its callers see them
    # The backend, the faults, the senders, the elector and serve.py (procs.py) call these on the
    # copy; each is its side's own method (the docstrings are there), so callers need not know
    # which side holds it.
    def spawn(self, gen: Gen) -> simpy.Process:
        return self.control.spawn(gen)

    def serve(self, handler: Callable[[], Gen], deadline: float, watch: ClientWatch | None = None,
              work: float = 0.0, work_after: bool = False) -> Gen:
        return self.control.serve(handler, deadline, watch, work, work_after)

    def kill(self) -> None:
        self.control.kill()

    def exit(self) -> None:
        self.control.exit()

    def stop(self, timeout: float = 5.0) -> simpy.Event | None:
        return self.control.stop(timeout)

    def restart(self) -> None:
        self.control.restart()

    def pause(self) -> None:
        self.control.pause()

    def resume(self) -> None:
        self.control.resume()

    def wipe_data(self) -> None:
        self.control.wipe_data()

    def checkpoint_writes(self) -> list[str]:
        return self.control.checkpoint_writes()

    def replicate(self, req: ReplicateReq, deadline: float) -> Gen:
        return self.replica.replicate(req, deadline)

    def migrate(self, req: ps_pb2.MigrateRequest, deadline: float) -> Gen:
        return self.migration.migrate(req, deadline)

    def checkpoint(self, shared: bool | None = None) -> Gen:
        return self.checkpoints.checkpoint(shared)

    def load_local(self) -> None:
        self.checkpoints.load_local()

    def plan_restore(self) -> RestorePlan:
        return self.checkpoints.plan_restore()

    def adopt_restore(self, plan: RestorePlan, routing_rec: Routing, epoch: int) -> None:
        self.checkpoints.adopt_restore(plan, routing_rec, epoch)

    # ------------------------------------------------------------ RPCs (each through `serve`)
    def push(self, req: ps_pb2.PushRequest, deadline: float, caller: str | None = None) -> Gen:
        """`reply = yield from copy.push(req, deadline, caller)`: ShardNode.push in virtual time,
        called by a PS client (`caller`; default: the update's worker) that watches the record."""
        watch = client_watch(caller or req.update.worker or "client", req, self.now())
        return (yield from self.serve(lambda: self._push(req, deadline), deadline, watch, self.work_of(req.ByteSize())))

    def pull(self, req: ps_pb2.PullRequest, deadline: float, caller: str | None = None) -> Gen:
        """`raw = yield from copy.pull(req, deadline, caller)`: ShardNode.pull, the serialized PullReply."""
        watch = client_watch(caller or req.worker or "client", req, self.now())
        return (yield from self.serve(lambda: self._pull(req, deadline), deadline, watch, self.request_s))

    def serve_status(self, req: ps_pb2.StatusRequest, deadline: float) -> Gen:
        """The Status call as a call: no answer while paused (until its deadline: no caller of
        Status watches the shard record), refused once down. `deadline` is the server's, as for
        every handler: the caller's less DEADLINE_MARGIN_S (pschaos.psnodes.server.calls.deadline_of); a paused
        copy's call is given up at the caller's own deadline."""
        def instant() -> Gen:
            return self.status(req)
            yield  # noqa: unreachable - makes this a generator
        return (yield from self.serve(instant, deadline))

    def status(self, req: ps_pb2.StatusRequest) -> ps_pb2.StatusReply:
        """ShardNode.status, at this instant (whatever the copy's state: see `serve_status`)."""
        return status_reply(self, req)

    def _push(self, req: ps_pb2.PushRequest, deadline: float) -> Gen:
        upd = req.update
        self.check_shard(req.shard, "Push")
        if upd.kind not in (ps_pb2.Update.PUSH, ps_pb2.Update.INIT):
            raise InvalidArgument(f"update.kind={upd.kind}: clients send PUSH (0) or INIT (1)")
        yield from self.migration.sync_routing(req.routing_epoch, deadline)
        self.check_primary(req.epoch)
        epoch = self.epoch
        ownership.check_push(self, req.routing_epoch, upd)
        routing_epoch = self.store.routing_epoch
        if self.cfg.mode == "async":
            yield from acks.wait_lag(self, epoch, deadline)
        dec = self.store.validate(upd)                # a malformed retry is refused too, not "duplicate"
        dup_seq, applied_on, applied_as = self.store.duplicate_as(upd)
        noop = dup_seq is None and self.store.is_noop(dec)
        mods = [self.store.dense_mod[n] for n, _ in dec.dense] if noop else []
        d = dedup.decide(dup_seq, noop, mods, self.store.seq)
        seq = d.seq
        if d.kind is dedup.Push.APPLY:
            seq = self.store.apply(dec, upd.SerializeToString(), epoch)
            self.peer_seq[self.name] = seq
            self.notify()
            # the real primary's CPU per applied push beyond the call's (calibration
            # push_cpu_extra_s), after the apply (no decision waits on it), on its GIL line, so
            # its senders' Replicates queue behind it as they do for real
            yield from use(self.cpu, self.push_extra_s, self.name)
        if self.cfg.mode == "sync":
            yield from acks.wait_replicated(self, seq, epoch, deadline)
        else:
            yield from acks.wait_followers(self, epoch, deadline)
        return ps_pb2.PushReply(epoch=epoch, seq=seq, duplicate=d.duplicate, node=self.name,
                                routing_epoch=routing_epoch, applied_on=applied_on,
                                applied_as=applied_as if d.duplicate else "")

    def _pull(self, req: ps_pb2.PullRequest, deadline: float) -> Gen:
        self.check_shard(req.shard, "Pull")
        ids = self.store.check_pull(req)
        yield from self.migration.sync_routing(req.routing_epoch, deadline)
        self.check_primary(req.epoch)
        epoch = self.epoch
        ownership.check_pull(self, req)
        refused = membership.no_barrier(req.min_clock, self.cfg.barrier)
        if refused:
            raise InvalidArgument(refused)
        while (why := membership.pull_wait(req.min_clock, self.store.clocks, self.members, req.worker,
                                           self.cfg.workers, True)) is not None:
            left = deadline - self.now()
            if left <= 0:
                raise Timeout(why)
            yield from self.wait_change(min(left, 0.05))
            self.check_primary(req.epoch)
        ownership.check_pull(self, req)     # again after the barrier wait (ShardNode.pull)
        dense = [] if req.no_dense else self.store.pull_dense(req.since_seq, list(req.names))
        rows = [self.store.pull_rows(r.table, i) for r, i in zip(req.sparse, ids)]
        crc = dense_digest(owned_dense(self.store)) if wants_digest(req) else None   # no yield since the reads above
        seq = self.store.seq
        reply = encode_pull_reply(epoch, seq, self.name,
                                  ((n, a.shape, memoryview(a).cast("B")) for n, a in dense),
                                  ((r.table, i.tobytes(), dim, data.tobytes())
                                   for r, (i, data, dim) in zip(req.sparse, rows)), crc, self.store.routing_epoch)
        if self.cfg.mode == "sync":
            # a read index (ShardNode.pull): shown once every in-sync copy holds `seq`
            yield from acks.wait_replicated(self, seq, epoch, deadline)
            reply += committed_field(acks.committed(self))
        return reply

    # ------------------------------------------------------------ observation
    def final_state(self, under: list[int] | None = None) -> dict:
        """What the runner records as `final-state` for this copy (status.py)."""
        return final_state_of(self, under)


__all__ = ["SimCopy"]
