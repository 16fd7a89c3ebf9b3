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

ShardNode is built in layers, a module each, every one importing only those below it:
primacy.py (the copy's state under its lock: role and epoch, lease, the waits before an ack),
checkpointing.py (checkpoints and the restore choice), and this one, the RPCs it serves;
calls.py holds a served call's deadline and cancellation. Elastic shards' checks and Migrate
steps are pschaos.psnodes.server.ownership's, which reads the node through the Protocols of
shells.py and so never imports it.
"""
from __future__ import annotations

import json
import time
from typing import Callable

from pschaos.psnodes.store import moving
from pschaos.psnodes.server import ownership
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core import dedup, fencing, membership
from pschaos.psnodes.store.digest import dense_digest, wants_digest
from pschaos.psnodes.errors import InvalidArgument, NotPrimary, StaleEpoch, Timeout
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.server.calls import always, given_up
from pschaos.psnodes.server.checkpointing import Checkpointing
from pschaos.psnodes.server.primacy import Primacy
from pschaos.psnodes.store.updatelog import Entry
from pschaos.psnodes.wire.wire import committed_field, encode_pull_reply


class ShardNode(Checkpointing, Primacy):
    """One shard copy as it serves: Push, Pull, Replicate, Status and Migrate, over the layers of
    Primacy (state, role, lease, ack waits) and Checkpointing."""

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
            ownership.check_pull(self, req)     # again: the barrier wait let go of the lock (a switch may have come)
            dense = [] if req.no_dense else self.store.pull_dense(req.since_seq, list(req.names))
            rows = [self.store.pull_rows(r.table, i) for r, i in zip(req.sparse, ids)]
            crc = dense_digest(moving.owned_dense(self.store)) if wants_digest(req) else None   # same lock as the reply
            seq = self.store.seq
            reply = encode_pull_reply(epoch, seq, self.name,
                                      ((n, a.shape, memoryview(a).cast("B")) for n, a in dense),
                                      ((r.table, ids.tobytes(), dim, data.tobytes())
                                       for r, (ids, data, dim) in zip(req.sparse, rows)), crc,
                                      self.store.routing_epoch)
            if self.cfg.mode == "sync":
                # a read index: the state was read at `seq` under the lock, and is shown only once
                # every in-sync copy holds `seq`, so no worker sees a state a failover undoes. The
                # wait lets go of the lock; entries applied meanwhile are not in the reply (waiting
                # before the read let the twin's scale-in-shards read seq 210 at watermark 209, and
                # waiting again for each new head could chase it to the deadline)
                self._wait_replicated(seq, epoch, deadline, active)
                reply += committed_field(self._committed())
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
            if req.holdings:
                reply.holdings_json = json.dumps(self.store.holdings(list(req.holdings_under)))
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
