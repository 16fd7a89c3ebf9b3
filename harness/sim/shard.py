"""A simulated shard copy: the real ShardStore and psnodes.core's decisions, in virtual time.

This is psnodes/node.py's second shell. Where the real node holds a lock and a condition
variable, a copy here is only touched by one SimPy process at a time, and "notify" is an event
that waiting processes yield on (`_changed`). Every decision is the core's: dedup, the ack rule
and follower lease, the lease bound, fencing and replicate verdicts. The processes that drive a
copy (replication senders, elector, keepalive, bootstrap) are in shard_replication.py and
shard_election.py, composed in shard_procs.py: the split of psnodes' node.py, replication.py and
election.py.

Killing a copy (`kill`) interrupts its processes and makes it refuse every call, as a killed
process refuses connections; its store stays as it was, for the final-state reading.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import simpy

from psnodes.config import ClusterConfig, ShardRecord
from psnodes.core import ack, dedup, fencing, lease
from psnodes.errors import NotPrimary, ReplicationFailed, StaleEpoch
from psnodes.placement import parse_node_name
from psnodes.proto import ps_pb2
from psnodes.store import ShardSpec, ShardStore
from psnodes.updatelog import Entry

from .clock import SimClock
from .etcd import SimEtcd
from .network import SimNetwork
from .rpc import Gen, SimHistory, etcd_call


@dataclass
class ReplicateReq:
    """psnodes' ReplicateRequest as plain values (the sim sizes it instead of encoding it)."""

    shard: int
    epoch: int
    primary: str
    entries: list[Entry]
    primary_seq: int
    epoch_start: int
    state: bytes
    primary_seq_epoch: int

    def nbytes(self) -> int:
        return 64 + len(self.state) + sum(16 + len(e.payload) for e in self.entries)


@dataclass
class ReplicateReply:
    applied_seq: int
    epoch: int
    suspecting: bool
    seq_epoch: int


class SimCopy:
    """One copy `shard-<i>/<r>`: store, role, ISR and lease bound, and its RPC handlers."""

    def __init__(self, env: simpy.Environment, clock: SimClock, etcd: SimEtcd, net: SimNetwork,
                 cfg: ClusterConfig, name: str, history: SimHistory) -> None:
        self.env, self.clock, self.etcd, self.net, self.cfg, self.name = env, clock, etcd, net, cfg, name
        self.history = history
        self.shard, self.slot = parse_node_name(name)
        self.store = ShardStore(ShardSpec(
            shard=self.shard, num_shards=cfg.shards, tables=dict(cfg.tables),
            optimizer=cfg.optimizer_config(), seed=cfg.seed, workers=cfg.workers,
            log_entries=cfg.log_entries, limits=cfg.request_limits()))
        self.alive = True
        self.role = "starting"
        self.epoch = 0
        self.primary = ""
        self.isr: list[str] = []
        self.epoch_start = 0
        self.last_heard = env.now
        self.in_sync = False
        self.peer_seq: dict[str, int] = {}
        self.peer_heard: dict[str, float] = {}
        self.suspecting = 0
        self.verified: set[tuple[int, str]] = set()   # (epoch, primary) pairs etcd's record confirmed
        self.lease = 0
        self.lease_until = math.inf
        self.lease_seen = math.inf
        self.procs: list[simpy.Process] = []
        self._changed = env.event()
        self.on_promote: Callable[[], None] = lambda: None     # set by shard_procs: start senders

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

    def spawn(self, gen: Gen) -> simpy.Process:
        """Run one of this copy's processes; `kill` interrupts it."""
        def guarded() -> Gen:
            try:
                yield from gen
            except simpy.Interrupt:
                return
        p = self.env.process(guarded())
        self.procs.append(p)
        self.procs = [q for q in self.procs if q.is_alive]
        return p

    def ecall(self, fn: Callable[[], Any]) -> Gen:
        return (yield from etcd_call(self.net, self.env, self.name, fn))

    def kill(self) -> None:
        """Stop every process of this copy; it answers nothing from now on."""
        self.alive = False
        active = self.env.active_process
        for p in self.procs:
            if p.is_alive and p is not active:
                p.interrupt("killed")
        self.procs = []
        self.notify()

    # ------------------------------------------------------------ roles
    def is_primary(self, epoch: int | None = None) -> bool:
        return self.alive and self.role == "primary" and (epoch is None or self.epoch == epoch)

    def become_primary(self, rec: ShardRecord) -> None:
        self.role, self.epoch, self.primary = "primary", rec.epoch, self.name
        self.verified.add((rec.epoch, self.name))
        self.in_sync = True
        self.isr, self.epoch_start = list(rec.isr), rec.start_seq
        self.peer_seq = {self.name: self.store.seq}
        self.peer_heard = {}
        self.notify()
        self.emit("promote", {"shard": self.shard, "epoch": rec.epoch, "node": self.name,
                              "seq": self.store.seq, "isr": rec.isr})
        self.on_promote()

    def follow(self, epoch: int, primary: str, epoch_start: int) -> None:
        """Adopt a (newer) primary; a primary that sees a higher epoch steps down (its senders
        stop on their own: they run only while `is_primary(their epoch)`)."""
        was_primary = self.role == "primary"
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

    def lease_lost(self, reason: str) -> bool:
        if self.role != "primary":
            return False
        self.follow(self.epoch, "", self.epoch_start)
        self.emit("lease-lost", {"shard": self.shard, "epoch": self.epoch, "reason": reason})
        return True

    def _check_lease(self) -> None:
        if not lease.valid(self.now(), self.lease_until):
            raise NotPrimary(f"{self.name} could not renew its etcd lease in time; retry")

    def _check_primary(self, client_epoch: int) -> None:
        why = fencing.serve_refusal_words(self.name, self.shard, self.role, self.epoch, self.primary, client_epoch)
        if why:
            raise NotPrimary(why)
        self._check_lease()

    def _replicas(self) -> ack.Replicas:
        return ack.Replicas(self.name, self.isr, self.peer_seq, self.cfg.mode, self.cfg.min_isr)

    # ------------------------------------------------------------ push
    def push(self, req: ps_pb2.PushRequest, deadline: float) -> Gen:
        """`reply = yield from copy.push(req, deadline)`: node.py's push, waits in virtual time."""
        upd = req.update
        self._check_primary(req.epoch)
        epoch = self.epoch
        if self.cfg.mode == "async":
            yield from self._wait(epoch, deadline, lambda: ack.within_lag(self._replicas(), self.store.seq,
                                                                           self.cfg.max_lag),
                                  lambda: f"replicas trail more than max_lag={self.cfg.max_lag} entries")
        dup_seq = self.store.duplicate_seq(upd)
        dec = self.store.validate(upd) if dup_seq is None else None
        noop = dec is not None and self.store.is_noop(dec)
        mods = [self.store.dense_mod[n] for n, _ in dec.dense] if noop else []
        d = dedup.decide(dup_seq, noop, mods, self.store.seq)
        seq = d.seq
        if d.kind is dedup.Push.APPLY:
            seq = self.store.apply(dec, upd.SerializeToString(), epoch)
            self.peer_seq[self.name] = seq
            self.notify()
        if self.cfg.mode == "sync":
            yield from self._wait(epoch, deadline, lambda: ack.replicated(self._replicas(), seq),
                                  lambda: f"seq {seq} not acknowledged by in-sync replicas "
                                          f"{ack.lagging(self._replicas(), seq)} in time (ISR {self.isr}); retry")
        else:
            yield from self._wait(epoch, deadline, self._followers_fresh,
                                  lambda: f"in-sync replicas have not answered recently "
                                          f"({ack.silent(self.name, self.isr, self.peer_heard) or self.isr}); retry")
            self._check_lease()
        return ps_pb2.PushReply(epoch=epoch, seq=seq, duplicate=d.duplicate, node=self.name)

    def _followers_fresh(self) -> bool:
        return ack.followers_fresh(self.name, self.isr, self.peer_heard, self.now(),
                                   self.cfg.suspect_s, self.cfg.follower_margin_s)

    def _wait(self, epoch: int, deadline: float, done: Callable[[], bool], late: Callable[[], str]) -> Gen:
        """node.py's wait loops: until `done`, while primary of `epoch` under a live lease."""
        while True:
            if not self.is_primary(epoch):
                raise NotPrimary(f"{self.name} lost primacy of shard {self.shard}; retry with the same request id")
            self._check_lease()
            if done():
                return
            left = deadline - self.now()
            if left <= 0:
                raise ReplicationFailed(late())
            yield from self.wait_change(min(left, 0.05))

    # ------------------------------------------------------------ replicate
    def replicate(self, req: ReplicateReq) -> Gen:
        """node.py's replicate: a new sender confirmed by etcd's record, the fencing verdict, then
        entries in order, then log matching."""
        verdict = fencing.on_replicate(self.epoch, self.role, self.primary, req.epoch, req.primary)
        if verdict is fencing.Replicate.FOLLOW and (req.epoch, req.primary) not in self.verified:
            try:
                kv = yield from self.ecall(lambda: self.etcd.get(self.cfg.shard_key(self.shard)))
            except Exception as e:  # noqa: BLE001 - no etcd, no proof of who leads that epoch
                raise NotPrimary(f"replicate from {req.primary} at epoch {req.epoch}: etcd could not confirm "
                                 f"the shard record ({e}); retry") from None
            rec = ShardRecord.from_json(kv.value) if kv else None
            why = fencing.sender_refusal(rec.epoch if rec else None, rec.primary if rec else None,
                                         req.epoch, req.primary)
            if why:
                raise StaleEpoch(f"replicate from {req.primary} at epoch {req.epoch} refused by {self.name}: {why}")
            self.verified.add((req.epoch, req.primary))
            verdict = fencing.on_replicate(self.epoch, self.role, self.primary, req.epoch, req.primary)
        why = fencing.replicate_refusal(verdict, self.name, self.epoch, req.epoch, req.primary)
        if why:
            raise StaleEpoch(why)
        if verdict is fencing.Replicate.FOLLOW:
            self.follow(req.epoch, req.primary, req.epoch_start)
        self.last_heard = self.now()
        self.in_sync = self.store.take_replicated(req.state, req.entries, req.primary_seq,
                                                  req.primary_seq_epoch, self.in_sync, req.epoch)
        self.notify()
        return ReplicateReply(self.store.seq, self.epoch, fencing.suspecting(self.suspecting, req.epoch),
                              self.store.seq_epoch)

    # ------------------------------------------------------------ observation
    def final_state(self) -> dict:
        """What the runner records as `final-state` for this copy (backend_process's fields)."""
        st = {"node": self.name, "shard": self.shard, "alive": self.alive}
        if not self.alive:
            return st
        return {**st, "role": self.role, "epoch": self.epoch, "seq": self.store.seq,
                "checksum": self.store.checksum(), "pushes": self.store.pushes,
                "applied": {k: [list(r) for r in v] for k, v in self.store.applied.ranges.items()},
                "restored_from": "", "audit": self.store.audit_counts()}


__all__ = ["ReplicateReply", "ReplicateReq", "SimCopy"]
