"""One shard copy: its store, its role in the shard (primary or replica), and the RPC behaviour.

The node is the single owner of its store; a condition variable guards the store, the role and
the in-sync replica set (ISR). A sync-mode push is acked only once every ISR member applied
it, and the ISR only shrinks in etcd before the primary acks without a member, so every acked
update lives on every copy that may be promoted. Epochs fence everything else: a request or a
replication call from a lower epoch is refused.

Primacy is also bounded by the node's etcd lease. A copy restores the shard from checkpoint only
after every ISR copy's lease expired in etcd; so a primary acks only while its lease cannot have
expired: until `lease_until`, the send time of its last successful keepalive plus the TTL less a
margin. Past it, it refuses pushes and pulls and steps down (the elector re-elects through etcd).

The decisions themselves live in pschaos.psnodes.core (no I/O, threads or clocks); this is their shell:
it holds the lock, reads the clock, waits, and carries out what the core decides.
"""
from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

import grpc

from pschaos.psnodes.store import moving
from pschaos.psnodes.server import ownership
from pschaos.psnodes.store.checkpoint import read_checkpoint, write_checkpoint
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.core import ack, checkpoints, dedup, fencing, lease, membership, promotion
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.store.digest import dense_digest, wants_digest
from pschaos.psnodes.errors import Cancelled, InvalidArgument, NotPrimary, ReplicationFailed, StaleEpoch, Timeout, TooLarge
from pschaos.psnodes.etcd import Etcd
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.membership.members import view_event
from pschaos.psnodes.server.metrics import NodeMetrics
from pschaos.psnodes.placement import parse_node_name
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.store import ShardSpec, ShardStore
from pschaos.psnodes.store.updatelog import Entry
from pschaos.psnodes.wire.wire import encode_pull_reply

log = logging.getLogger("pschaos.psnodes.server.node")
VERIFIED = "verified.json"
MAX_WAIT_S = 10.0               # no call waits longer on the server (BSP/SSP pulls wait the longest)      # beside the local checkpoint: primaries etcd confirmed to this copy


def always() -> bool:
    """The `active` of a call nobody can cancel (one made in-process)."""
    return True


def given_up(active: Callable[[], bool], what: str) -> None:
    """Raise Cancelled when the caller gave the call up (`active`: grpc's context.is_active):
    a wait for it would hold an RPC thread to its deadline for an answer nobody reads (the
    client's deposed-primary watch cancels calls to a primary it saw replaced)."""
    if not active():
        raise Cancelled(f"{what}: the caller cancelled the call; the wait ended")


@dataclass
class RestorePlan:
    """What a restore would take, prepared without touching the node: the shared checkpoint's state
    loaded aside (`store`), or None to keep this copy's own state."""

    source: str          # "checkpoint@<seq>" or "local@<seq>"
    seq: int
    seq_epoch: int
    store: ShardStore | None


class ShardNode:
    def __init__(self, cfg: ClusterConfig, name: str, links: dict[str, str], etcd: Etcd,
                 events: EventLog, metrics: NodeMetrics | None = None) -> None:
        self.cfg, self.name, self.links, self.etcd, self.events = cfg, name, links, etcd, events
        self.shard, self.slot = parse_node_name(name)
        self.metrics = metrics or NodeMetrics(name)
        self.store = ShardStore(ShardSpec(
            shard=self.shard, num_shards=cfg.shards, tables=dict(cfg.tables),
            optimizer=cfg.optimizer_config(), seed=cfg.seed, workers=cfg.workers,
            log_entries=cfg.log_entries, limits=cfg.request_limits(), max_reply_bytes=cfg.max_message_bytes))
        self.cond = threading.Condition(threading.Lock())
        # (role, epoch) as one tuple, replaced whole under the lock and read without it: a replica's
        # probe (Status with `probe`) is answered from it, so a primary busy under its lock (push
        # apply, checksum, migration) still answers that it is alive (`probe_status`)
        self._term: tuple[str, int] = ("starting", 0)
        self.primary = ""
        self.isr: list[str] = []
        self.epoch_start = 0
        self.last_heard = time.monotonic()
        self.in_sync = False            # matched a primary's (seq, epoch) since this process started
        self.peer_seq: dict[str, int] = {}
        # async mode's follower lease: per ISR peer, the send time (monotonic) of the last replicate
        # call it accepted at our epoch; it cannot suspect us, let alone be promoted, before that
        # time plus the suspicion floor (cfg.suspect_floor_s: every detector waits at least that
        # long), so until then no higher epoch can exist without our knowing
        self.peer_heard: dict[str, float] = {}
        # as a replica: how long a silence of our primary must last before we suspect it (lock held)
        self.detector = cfg.failure_detector()
        self.suspecting = 0      # the epoch this replica is a candidate against (0: none); lock held
        self.stopping = threading.Event()
        self.lease = 0
        # monotonic time until which the etcd lease surely lives; a node run without etcd (in-process
        # tests) never holds a lease and is not bounded by one; the elector sets it at registration
        self.lease_until = math.inf
        self.lease_seen = math.inf      # when etcd last confirmed the lease (monotonic)
        self.restored_from = ""
        self.verified: set[tuple[int, str]] = set()   # (epoch, primary) pairs etcd's record confirmed
        self.ckpt_lock = threading.Lock()                     # one checkpoint export and write at a time
        self.snapshot_slot = threading.Lock()                 # one Snapshot call at a time; others are refused
        # the worker membership generation BSP/SSP pulls are gated by (psnodes/membership/member_watch.py)
        self.members: membership.Record | None = None
        self.on_promote: Callable[[], None] = lambda: None   # set by the replication manager
        self.on_step_down: Callable[[], None] = lambda: None
        self.metrics.set_role(self.role)

    # ------------------------------------------------------------------ roles
    # read-only: a setter of one half would publish a torn (role, epoch) to the lock-free probe
    # between two assignments; `_term` is replaced whole, under the lock (become_primary, follow)
    @property
    def role(self) -> str:
        return self._term[0]

    @property
    def epoch(self) -> int:
        return self._term[1]

    def is_primary(self, epoch: int | None = None) -> bool:
        return self.role == "primary" and (epoch is None or self.epoch == epoch)

    def become_primary(self, rec: ShardRecord, bootstrap: bool = False) -> None:
        """Take the epoch of `rec`; `bootstrap`: this created the shard's first record (of this life)."""
        with self.cond:
            self._term, self.primary = ("primary", rec.epoch), self.name
            self.verified.add((rec.epoch, self.name))
            self.in_sync = True
            self.isr, self.epoch_start = list(rec.isr), rec.start_seq
            self.peer_seq = {self.name: self.store.seq}
            self.peer_heard = {}
            self.cond.notify_all()
        self.metrics.set_role("primary")
        self.metrics.epoch.set(rec.epoch)
        self.metrics.failovers.inc()
        self.events.emit("promote", promote_event(self.shard, rec, self.name, self.store.seq, bootstrap))
        self.on_promote()

    def follow(self, epoch: int, primary: str, epoch_start: int) -> None:
        """Adopt a (newer) primary; a primary that sees a higher epoch steps down. Lock held."""
        was_primary = self.role == "primary"
        if (epoch, primary) != (self.epoch, self.primary):
            self.detector.restart()      # a new stream: its first call starts no gap
        self._term, self.primary, self.epoch_start = ("replica", epoch), primary, epoch_start
        if primary:             # every caller took the pair from etcd's record or had it confirmed there
            self.verified.add((epoch, primary))
        self.last_heard = time.monotonic()
        self.cond.notify_all()
        self.metrics.set_role("replica")
        self.metrics.epoch.set(epoch)
        if was_primary:
            self.events.emit("step-down", {"shard": self.shard, "epoch": epoch, "primary": primary})
            threading.Thread(target=self.on_step_down, daemon=True).start()

    def fenced(self, reason: str) -> None:
        """We learned our epoch is over (a replica refused us): step down and re-read the route."""
        try:
            kv = self.etcd.get(self.cfg.shard_key(self.shard))
            rec = ShardRecord.from_json(kv.value) if kv else None
        except Exception:
            rec = None
        with self.cond:
            if self.role != "primary":
                return
            if fencing.deposed_by(rec.epoch if rec is not None else None, self.epoch):
                self.follow(rec.epoch, rec.primary, rec.start_seq)
            else:
                self.follow(self.epoch, "", self.epoch_start)
        self.events.emit("fenced", {"shard": self.shard, "reason": reason})

    # ------------------------------------------------------------ membership
    def adopt_members(self, rec: membership.Record) -> None:
        """Gate by a newer membership generation from now on (older ones are ignored)."""
        with self.cond:
            if not membership.newer(rec, self.members):
                return
            self.members = rec
            # under the lock: the event's time precedes every pull this generation gates (the
            # staleness check takes a view as held from its event on)
            self.events.emit("member-view", view_event(self.shard, rec))
            self.cond.notify_all()

    def _gate(self, req: ps_pb2.PullRequest) -> str | None:
        """Why a pull waits yet (lock held), None when it may be served (pschaos.psnodes.core.membership)."""
        return membership.pull_wait(req.min_clock, self.store.clocks, self.members, req.worker, self.cfg.workers,
                                    self.etcd is not None)

    # ------------------------------------------------------------------ lease
    def renew_lease(self, sent: float, ttl: float) -> None:
        """etcd confirmed the lease at some moment after `sent` (monotonic) for `ttl` seconds."""
        with self.cond:
            self.lease_until = lease.renewed(self.lease_until, sent, ttl, self.cfg.lease_margin_s)
            self.lease_seen = time.monotonic()
            self.cond.notify_all()

    def lease_valid(self) -> bool:
        return lease.valid(time.monotonic(), self.lease_until)

    def lease_lost(self, reason: str) -> bool:
        """The lease may have expired: stop being primary (its senders stop, so replicas suspect and
        elect through etcd). Returns True when this node stepped down."""
        with self.cond:
            if self.role != "primary":
                return False
            self.follow(self.epoch, "", self.epoch_start)
        self.events.emit("lease-lost", {"shard": self.shard, "epoch": self.epoch, "reason": reason})
        return True

    def _check_lease(self) -> None:
        if not self.lease_valid():
            raise NotPrimary(f"{self.name} could not renew its etcd lease in time: it stopped serving shard "
                             f"{self.shard} so that no other copy is restored while it acks; retry")

    def _check_shard(self, shard: int, method: str) -> None:
        if shard != self.shard:
            raise InvalidArgument(f"{method}: shard={shard} but {self.name} serves shard {self.shard}; "
                                  "route by the shard record in etcd")

    def _check_primary(self, client_epoch: int) -> None:
        why = fencing.serve_refusal_words(self.name, self.shard, self.role, self.epoch, self.primary, client_epoch)
        if why:
            raise NotPrimary(why)
        self._check_lease()

    def _replicas(self) -> ack.Replicas:
        """What the ack rule needs to know of the ISR (lock held)."""
        return ack.Replicas(self.name, self.isr, self.peer_seq, self.cfg.mode, self.cfg.min_isr)

    def _replicated(self, seq: int) -> bool:
        """The ack rule of the mode (pschaos.psnodes.core.ack.replicated); lock held."""
        return ack.replicated(self._replicas(), seq)

    def _wait_replicated(self, seq: int, epoch: int, deadline: float, active: Callable[[], bool] = always) -> None:
        """Block until every ISR member applied `seq` (lock held); raise if primacy is lost or the
        caller cancelled (`active`)."""
        while True:
            given_up(active, f"seq {seq}'s replication wait")
            if not self.is_primary(epoch):
                raise NotPrimary(f"{self.name} lost primacy of shard {self.shard} before seq {seq} "
                                 "was replicated; retry with the same request id")
            self._check_lease()
            if self._replicated(seq):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                lagging = ack.lagging(self._replicas(), seq)
                raise ReplicationFailed(f"seq {seq} not acknowledged by in-sync replicas {lagging} in time "
                                        f"(ISR {self.isr}, min_isr {self.cfg.min_isr}); retry with the same request id")
            self.cond.wait(min(left, 0.05))

    # ------------------------------------------------------------------- RPCs
    def push(self, req: ps_pb2.PushRequest, deadline: float, payload=None,
             active: Callable[[], bool] = always) -> ps_pb2.PushReply:
        """Apply (or recognise a retry of) a push; `payload` is the Update's wire bytes when known.
        Its waits (lag, replication, follower lease) end once the caller gave it up (`active`);
        the update stays applied, and a retry is recognised by its request id."""
        upd = req.update
        self._check_shard(req.shard, "Push")
        if upd.kind not in (ps_pb2.Update.PUSH, ps_pb2.Update.INIT):
            raise InvalidArgument(f"update.kind={upd.kind}: clients send PUSH (0) or INIT (1)")
        ownership.sync_routing(self, req.routing_epoch, deadline, active)
        with self.cond:
            self._check_primary(req.epoch)
            epoch = self.epoch
            ownership.check_push(self, req.routing_epoch, upd)
            routing_epoch = self.store.routing_epoch
            if self.cfg.mode == "async":
                self._wait_lag(epoch, deadline, active)
            dec = self.store.validate(upd)                # a malformed retry is refused too, not "duplicate"
            dup_seq, applied_on, applied_as = self.store.duplicate_as(upd)   # worker#incarnation, req_id, part
            noop = dup_seq is None and self.store.is_noop(dec)
            mods = [self.store.dense_mod[n] for n, _ in dec.dense] if noop else []
            d = dedup.decide(dup_seq, noop, mods, self.store.seq)
            seq, duplicate = d.seq, d.duplicate
            if d.kind is dedup.Push.DUPLICATE:
                self.metrics.duplicates.inc()
            elif d.kind is dedup.Push.APPLY:
                if payload is None or not len(payload):
                    payload = upd.SerializeToString()
                seq = self.store.apply(dec, payload, epoch)
                self.peer_seq[self.name] = seq
                self.metrics.pushes.inc()
                self.metrics.push_bytes.inc(len(payload))
                self.metrics.seq.set(seq)
                self.cond.notify_all()
            if self.cfg.mode == "sync":
                self._wait_replicated(seq, epoch, deadline, active)
            else:
                self._wait_followers(epoch, deadline, active)
        return ps_pb2.PushReply(epoch=epoch, seq=seq, duplicate=duplicate, node=self.name, routing_epoch=routing_epoch,
                                applied_on=applied_on, applied_as=applied_as if duplicate else "")

    def _followers_fresh(self) -> bool:
        """Every ISR peer accepted one of our replicate calls recently enough that it cannot have
        suspected us yet (async mode acks without waiting for replicas, so without this a deposed
        primary would ack at its old epoch until it happens to hear of the new one)."""
        return ack.followers_fresh(self.name, self.isr, self.peer_heard, time.monotonic(),
                                   self.cfg.suspect_floor_s, self.cfg.follower_margin_s)

    def _wait_followers(self, epoch: int, deadline: float, active: Callable[[], bool] = always) -> None:
        """Async mode: ack only under the follower lease (lock held); a silent peer is dropped from
        the ISR in etcd by its sender after suspect_s, and acks go on without it. The etcd lease
        bounds it too, checked on every pass and at the end, as in sync mode."""
        while not self._followers_fresh():
            given_up(active, "the follower-lease wait")
            if not self.is_primary(epoch):
                raise NotPrimary(f"{self.name} lost primacy of shard {self.shard}; retry with the same request id")
            self._check_lease()
            left = deadline - time.monotonic()
            if left <= 0:
                silent = ack.silent(self.name, self.isr, self.peer_heard)
                raise ReplicationFailed(f"in-sync replicas have not answered recently ({silent or self.isr}); "
                                        "retry with the same request id")
            self.cond.wait(min(left, 0.02))
        self._check_lease()

    def _wait_lag(self, epoch: int, deadline: float, active: Callable[[], bool] = always) -> None:
        """Async mode: bound replication lag by making pushes wait when a replica trails too far."""
        while not ack.within_lag(self._replicas(), self.store.seq, self.cfg.max_lag):
            given_up(active, "the replication-lag wait")
            if not self.is_primary(epoch):
                raise NotPrimary(f"{self.name} lost primacy of shard {self.shard}")
            self._check_lease()
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReplicationFailed(f"replicas trail more than max_lag={self.cfg.max_lag} entries")
            self.cond.wait(min(left, 0.05))

    def pull(self, req: ps_pb2.PullRequest, deadline: float, active: Callable[[], bool] = always) -> bytes:
        """A serialized PullReply, encoded from the live arrays under the lock (one copy). The
        request is checked against the limits before the lock, so no pull holds it for long. Its
        waits (the BSP/SSP barrier, replication) end once the caller gave it up (`active`)."""
        self._check_shard(req.shard, "Pull")
        ids = self.store.check_pull(req)
        ownership.sync_routing(self, req.routing_epoch, deadline, active)
        with self.cond:
            self._check_primary(req.epoch)
            epoch = self.epoch
            ownership.check_pull(self, req)
            refused = membership.no_barrier(req.min_clock, self.cfg.barrier)
            if refused:
                raise InvalidArgument(refused)
            while (why := self._gate(req)) is not None:
                given_up(active, "the BSP/SSP barrier wait")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Timeout(why)
                self.cond.wait(min(left, 0.05))
                self._check_primary(req.epoch)
            if self.cfg.mode == "sync":
                # read only what is replicated, so no worker ever sees a state a failover undoes
                self._wait_replicated(self.store.seq, epoch, deadline, active)
            dense = [] if req.no_dense else self.store.pull_dense(req.since_seq, list(req.names))
            rows = [self.store.pull_rows(r.table, i) for r, i in zip(req.sparse, ids)]
            crc = dense_digest(moving.owned_dense(self.store)) if wants_digest(req) else None   # same lock as the reply
            reply = encode_pull_reply(epoch, self.store.seq, self.name,
                                      ((n, a.shape, memoryview(a).cast("B")) for n, a in dense),
                                      ((r.table, ids.tobytes(), dim, data.tobytes())
                                       for r, (ids, data, dim) in zip(req.sparse, rows)), crc,
                                      self.store.routing_epoch)
        self.metrics.pulls.inc()
        self.metrics.pull_bytes.inc(len(reply))
        return reply

    def replicate(self, req: ps_pb2.ReplicateRequest) -> ps_pb2.ReplicateReply:
        """Take a primary's entries or state. Only from the copy etcd's shard record names as the
        primary of the request's epoch: a sender we do not follow yet is looked up in etcd (outside
        the lock) before anything happens, so neither a copy that is not primary nor an epoch
        that exists only on the wire (2**64-1) moves this copy. Everything sent is checked before
        any of it is taken (ShardStore.take_replicated)."""
        self._check_shard(req.shard, "Replicate")
        if len(req.primary) > 64:
            raise InvalidArgument(f"Replicate: primary is {len(req.primary)} characters long; a node name is "
                                  "shard-<i>/<r>")
        why = fencing.self_refusal(self.name, req.primary)
        if why:
            raise StaleEpoch(why)
        self._check_sender(req)
        with self.cond:
            verdict = fencing.on_replicate(self.epoch, self.role, self.primary, req.epoch, req.primary)
            why = fencing.replicate_refusal(verdict, self.name, self.epoch, req.epoch, req.primary)
            if why:
                raise StaleEpoch(why)
            if verdict is fencing.Replicate.FOLLOW and (req.epoch, req.primary) not in self.verified:
                raise NotPrimary(f"replicate from {req.primary} at epoch {req.epoch}: the shard record "
                                 "changed while it was checked; retry")
            # everything sent is checked before anything changes, the role included
            plan = self.store.plan_replicated(req.state, [Entry(e.seq, e.epoch, e.payload) for e in req.entries],
                                              req.epoch)
            if verdict is fencing.Replicate.FOLLOW:
                self.follow(req.epoch, req.primary, req.epoch_start)
            self.last_heard = time.monotonic()
            self.detector.heard(self.last_heard)
            self.in_sync = self.store.take_plan(plan, req.primary_seq, req.primary_seq_epoch, self.in_sync)
            self.metrics.seq.set(self.store.seq)
            self.cond.notify_all()
            return ps_pb2.ReplicateReply(applied_seq=self.store.seq, epoch=self.epoch,
                                         suspecting=fencing.suspecting(self.suspecting, req.epoch),
                                         seq_epoch=self.store.seq_epoch)

    def _check_sender(self, req: ps_pb2.ReplicateRequest) -> None:
        """A replicate call that would make us follow someone new must come from the primary that
        etcd's shard record names at exactly that epoch; remembered once seen (`verified`)."""
        with self.cond:
            verdict = fencing.on_replicate(self.epoch, self.role, self.primary, req.epoch, req.primary)
            if verdict is not fencing.Replicate.FOLLOW or (req.epoch, req.primary) in self.verified:
                return
        if self.etcd is None:           # in-process tests without etcd: the wire is all there is
            with self.cond:
                self.verified.add((req.epoch, req.primary))
            return
        try:
            kv = self.etcd.get(self.cfg.shard_key(self.shard))
            rec = ShardRecord.from_json(kv.value) if kv else None
        except Exception as e:  # noqa: BLE001 - no etcd, no proof of who leads that epoch
            raise NotPrimary(f"replicate from {req.primary} at epoch {req.epoch}: etcd could not confirm "
                             f"the shard record ({e}); retry") from None
        why = fencing.sender_refusal(rec.epoch if rec else None, rec.primary if rec else None, req.epoch, req.primary)
        if why:
            raise StaleEpoch(f"replicate from {req.primary} at epoch {req.epoch} refused by {self.name}: {why}")
        with self.cond:
            self.verified.add((req.epoch, req.primary))

    def status(self, req: ps_pb2.StatusRequest) -> ps_pb2.StatusReply:
        if req.probe:
            return self.probe_status()
        with self.cond:
            reply = ps_pb2.StatusReply(
                node=self.name, shard=self.shard, role=self.role, epoch=self.epoch, seq=self.store.seq,
                isr=self.isr, log_start=self.store.log.base_seq, seq_epoch=self.store.seq_epoch,
                restored_from=self.restored_from, pushes=self.store.pushes,
                routing_epoch=self.store.routing_epoch, routing_shards=list(self.store.shards),
                fence=(self.store.fence or {}).get("migration", ""))
            if req.checksum:
                reply.checksum = self.store.checksum()
            if req.applied:
                reply.applied_json = json.dumps(self.store.applied.ranges)
            if req.audit:
                counts = self.store.audit_counts()
                reply.audit_json = "" if counts is None else json.dumps(counts, sort_keys=True)
                reply.buckets_json = json.dumps(moving.bucket_counts(self.store), sort_keys=True)
        return reply

    def probe_status(self) -> ps_pb2.StatusReply:
        """A replica's probe (pschaos.psnodes.replication.probe): who this node is and its (role, epoch), without the
        node lock. The probe decides whether a primary is alive; one that holds its lock (a long
        push apply, a checksum, a migration step) is alive, and waiting for the lock made it
        look dead and replaced. The pair is one tuple, replaced whole under the lock, so it is
        never torn."""
        role, epoch = self._term
        return ps_pb2.StatusReply(node=self.name, shard=self.shard, role=role, epoch=epoch)

    def migrate(self, req: ps_pb2.MigrateRequest, deadline: float,
                active: Callable[[], bool] = always) -> ps_pb2.MigrateReply:
        """One step of a key migration (psnodes/server/ownership.py); its waits end once the caller gave up."""
        return ownership.migrate(self, req, deadline, active)

    # ------------------------------------------------------------- checkpoints
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
            self.events.emit("checkpoint", {"shard": self.shard, "seq": seq, "epoch": epoch, "term": term,
                                            "bytes": len(blob), "written": cur["time"]})
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
        got = read_checkpoint(folder)
        if got:
            man, blob = got
            try:
                self.store.import_state(blob)
            except Exception as e:  # noqa: BLE001 - start empty: a snapshot from the primary brings it back
                self.events.emit("checkpoint-error", {"shard": self.shard, "error": f"local checkpoint: {e}"})
                log.error("%s: local checkpoint not loaded: %s", self.name, e)
            else:
                self.events.emit("load", {"shard": self.shard, "seq": man["seq"], "source": "local"})
        try:
            pairs = json.loads((folder / VERIFIED).read_text())
            self.verified |= {(int(e), str(p)) for e, p in pairs}
        except (OSError, ValueError, TypeError):
            pass

    def _save_verified(self, folder) -> None:
        """Keep the newest confirmed (epoch, primary) pairs beside the local checkpoint."""
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
        got = read_checkpoint(self.cfg.checkpoint_dir(self.shard))
        ckpt = promotion.Position(int(got[0].get("epoch", 0)), int(got[0]["seq"])) if got else None
        if promotion.restore_from_checkpoint(mine, ckpt):
            aside = ShardStore(self.store.spec)
            try:
                aside.import_state(got[1])
            except Exception as e:  # noqa: BLE001 - a checkpoint that does not load is not restored
                self.events.emit("checkpoint-error", {"shard": self.shard, "error": f"restore: {e}"})
            else:
                return RestorePlan(f"checkpoint@{aside.seq}", aside.seq, aside.seq_epoch, aside)
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


def promote_event(shard: int, rec: ShardRecord, name: str, seq: int, bootstrap: bool) -> dict:
    """The `promote` event; the first term of a re-added shard (a bootstrap above epoch 1) says
    `bootstrap`, so that no check takes it for a failover of the old life's primary."""
    v = {"shard": shard, "epoch": rec.epoch, "node": name, "seq": seq, "isr": rec.isr}
    return {**v, "bootstrap": True} if bootstrap and rec.epoch > 1 else v


def deadline_of(context: grpc.ServicerContext, default: float) -> float:
    """When a call must be answered by: the client's deadline, capped at max(default, 10 s), so a
    client asking for a day (a BSP pull with min_clock 2**63-1) cannot hold a server thread."""
    left = context.time_remaining() if context is not None else None
    if left is None or left > 1e6:
        left = default
    return time.monotonic() + max(0.0, min(left, max(default, MAX_WAIT_S)) - 0.02)

