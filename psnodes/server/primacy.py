"""A shard copy's state and its primacy: its role and epoch, its etcd lease, and the waits before
a primary acks (the in-sync replicas, the follower lease, the replication lag).

One condition variable (`cond`) guards the store, the role and the in-sync replica set (ISR);
every method here that says "lock held" runs under it. The node's other layers build on this
one: checkpointing.py (checkpoints and the restore choice) and node.py (the RPCs), so that each
imports what lies below it and nothing imports back up. The decisions are pschaos.psnodes.core's
(ack, fencing, lease, membership); this is the shell that holds the lock, reads the clock and waits.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable

from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.core import ack, fencing, lease, membership
from pschaos.psnodes.errors import InvalidArgument, NotPrimary, ReplicationFailed
from pschaos.psnodes.etcd import Etcd
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.membership.members import view_event
from pschaos.psnodes.server.calls import always, given_up
from pschaos.psnodes.server.metrics import NodeMetrics
from pschaos.psnodes.placement import parse_node_name
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.state import ShardSpec
from pschaos.psnodes.store.store import ShardStore


class Primacy:
    """The state of one shard copy (store, role, ISR, lease) and the rules of its primacy; the base
    of ShardNode (psnodes/server/node.py), which adds the RPCs."""

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
            # what it holds as it takes the epoch, read under the lock: a push of the new epoch may
            # apply the moment the lock is released, and a seq read after that would make an ack
            # of an entry it never held look held (acks-durable, reads-committed read this event)
            seq = self.store.seq
            self.peer_seq = {self.name: seq}
            self.peer_heard = {}
            self.cond.notify_all()
        self.metrics.set_role("primary")
        self.metrics.epoch.set(rec.epoch)
        self.metrics.failovers.inc()
        self.events.emit("promote", promote_event(self.shard, rec, self.name, seq, bootstrap))
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

    def _committed(self) -> int | None:
        """Sync mode: the ISR watermark a read now shows (pschaos.psnodes.core.ack.watermark); lock held."""
        return ack.watermark(self._replicas(), self.store.seq) if self.cfg.mode == "sync" else None

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


def promote_event(shard: int, rec: ShardRecord, name: str, seq: int, bootstrap: bool) -> dict:
    """The `promote` event; the first term of a re-added shard (a bootstrap above epoch 1) says
    `bootstrap`, so that no check takes it for a failover of the old life's primary."""
    v = {"shard": shard, "epoch": rec.epoch, "node": name, "seq": seq, "isr": rec.isr}
    return {**v, "bootstrap": True} if bootstrap and rec.epoch > 1 else v
