"""Primary -> replica replication: one sender thread per peer, ISR changes through etcd.

Each sender ships whatever its peer lacks, in order, one call in flight: recent log entries when
the peer trails by a few, a state delta (changed keys since the peer's seq) when it trails by
more, a full snapshot when the peer's history no longer matches ours. Calls without entries are
heartbeats, by which replicas know the primary lives. A peer that stops answering is dropped from
the ISR in etcd *before* any push is acked without it; a peer that caught up is added back. A
call still in flight after suspect_s of silence is looked at: the peer is probed (a Status call
on each of its probe paths, pschaos.psnodes.replication.probe) and dropped only if no path answers, so a frozen peer,
which holds the call open to its deadline, leaves at once, and a slow link keeps its replica.

Invariant: every ISR member in etcd is in the primary's own ISR (so acks wait for it). Removals
land in etcd first, adds land in the primary's memory first and in etcd after; an add that etcd
could not take (it was down) is retried until it lands, or the peer would never be electable.
"""
from __future__ import annotations

import math
import threading
import time

import grpc

from pschaos.psnodes.wire.calls import CallFuture, CallPool
from pschaos.psnodes.wire.channels import auth, dial
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core import fencing, isr as isrs, logmatch
from pschaos.psnodes.core.logmatch import SyncKind
from pschaos.psnodes.errors import StaleEpoch, from_rpc_error
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.replication.probe import PrimaryProbe
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.server.servicer import SERVICE
from pschaos.psnodes.wire.wire import encode_replicate

BATCH_BYTES = 16 << 20


class PeerSender(threading.Thread):
    def __init__(self, mgr: "ReplicationManager", peer: str, epoch: int) -> None:
        super().__init__(name=f"send-{peer}", daemon=True)
        self.mgr, self.node, self.peer, self.epoch = mgr, mgr.node, peer, epoch
        cfg = self.node.cfg
        self.channel = dial(self.node.links[peer], cfg.max_message_bytes)
        self.replicate = self.channel.unary_unary(f"/{SERVICE}/Replicate", request_serializer=None,
                                                  response_deserializer=ps_pb2.ReplicateReply.FromString)
        self.md = auth(cfg.token, cfg.peer_token)
        self.stop = threading.Event()
        self.catchup: dict | None = None     # accounting while the peer is out of the ISR
        self.next_shrink = 0.0
        self.probe = PrimaryProbe(self.node)  # the look at a peer whose call is still in flight
        self.calls = CallPool(f"call-{peer}")  # one call in flight at a time: one thread, kept

    def run(self) -> None:
        try:
            self._run()
        finally:
            self.calls.close()
            self.channel.close()
            self.probe.close()

    def _run(self) -> None:
        node, cfg = self.node, self.node.cfg
        known: int | None = None
        known_epoch = 0
        last_ok = time.monotonic()
        last_sent = -math.inf
        call_s = 0.0                 # the last answered call's time: probe_wait's floor
        while not self.stop.is_set() and node.is_primary(self.epoch) and not node.stopping.is_set():
            # probe channels only to an in-sync peer, the only kind a look probes: a dead one out
            # of the ISR would be re-dialled every 200 ms for the whole epoch (pschaos.psnodes.replication.probe)
            if self.peer in node.isr:
                self.probe.warm(self.peer)
            else:
                self.probe.forget()
            with node.cond:
                while node.is_primary(self.epoch) and not self.stop.is_set():
                    wait = logmatch.idle_wait(known, node.store.seq, last_sent, time.monotonic(), cfg.heartbeat_s)
                    if wait <= 0:
                        break
                    node.cond.wait(wait)
                if not node.is_primary(self.epoch) or self.stop.is_set():
                    break
                req, changed, kind = self._build(known, known_epoch)
            size = len(req)
            sent = last_sent = time.monotonic()
            try:
                reply = self._await(self.calls.submit(self.replicate, req, timeout=cfg.rpc_timeout_s, metadata=self.md),
                                    last_ok, call_s)
            except grpc.RpcError as e:
                err = from_rpc_error(e)
                if isinstance(err, StaleEpoch):
                    node.fenced(f"{self.peer}: {err}")
                    break
                known = None
                self._drop_if_silent(last_ok, e.code().name)
                self.stop.wait(cfg.heartbeat_s)
                continue
            last_ok = time.monotonic()
            call_s = last_ok - sent
            node.metrics.replication_bytes.inc(size)
            self._account(known, reply, size, changed, kind)
            known, known_epoch = reply.applied_seq, reply.seq_epoch
            with node.cond:
                if fencing.renews_follower_lease(reply.epoch, self.epoch, reply.suspecting):
                    node.peer_heard[self.peer] = max(node.peer_heard.get(self.peer, sent), sent)
                    node.cond.notify_all()
                matched = node.store.matches(known, known_epoch)
                if matched:
                    node.peer_seq[self.peer] = known
                    node.metrics.lag.labels(peer=self.peer).set(node.store.seq - known)
                    node.cond.notify_all()
                caught_up = logmatch.caught_up(known, matched, node.store.seq)
                if isrs.should_readd(caught_up, self.peer in node.isr):
                    node.isr.append(self.peer)        # conservative first: waits include it at once
                    node.cond.notify_all()
                    add = True
                else:
                    add = False
            if add:
                self._finish_catchup(known)
                self.mgr.request_add(self.peer, self.epoch)

    def _await(self, fut: CallFuture, last_ok: float, call_s: float) -> ps_pb2.ReplicateReply:
        """The call's reply (its grpc.RpcError raised). While it is in flight past suspect_s of
        silence, an in-sync peer is probed: any answer holds it for isr.probe_hold (a slow link; an
        "isr-held" event), none drops it from the ISR then (frozen or cut off), not at the call's
        deadline."""
        node, cfg = self.node, self.node.cfg
        held = 0.0
        while True:
            looking = (self.peer in node.isr and node.is_primary(self.epoch) and not self.stop.is_set()
                       and not node.stopping.is_set())
            due = max(isrs.drop_due(last_ok, cfg.suspect_s, self.next_shrink), held)
            try:
                return fut.result(timeout=max(0.0, due - time.monotonic()) if looking else None)
            except grpc.FutureTimeoutError:
                pass
            if self.probe.answers(self.peer, isrs.probe_wait(cfg.probe_s, cfg.suspect_s, call_s)):
                held = time.monotonic() + isrs.probe_hold(cfg.probe_s, cfg.heartbeat_s)
                node.events.emit("isr-held", {"shard": node.shard, "epoch": self.epoch, "peer": self.peer,
                                              "silent_ms": round((time.monotonic() - last_ok) * 1000, 1)})
            elif not fut.done():
                self._drop_if_silent(last_ok, "no answer to the call in flight or to a probe")

    def _drop_if_silent(self, last_ok: float, why: str) -> None:
        """Drop the peer from the ISR once it answered nothing for suspect_s (etcd first), while
        this sender's node is still its epoch's primary."""
        node, cfg, now = self.node, self.node.cfg, time.monotonic()
        if not node.is_primary(self.epoch) or self.stop.is_set() or node.stopping.is_set():
            return
        if isrs.should_drop(now, last_ok, cfg.suspect_s, self.peer in node.isr, self.next_shrink):
            if not self.mgr.change_isr(remove=self.peer, reason=f"no answer for {cfg.suspect_s}s: {why}"):
                self.next_shrink = now + 1.0     # refused (min_isr) or etcd down: retry later

    def _build(self, known: int | None, known_epoch: int) -> tuple[bytes, int, str]:
        """What to send now, serialized (lock held): heartbeat, entries, a delta or a snapshot."""
        node = self.node
        store = node.store

        def req(entries=(), state: bytes = b"") -> bytes:
            return encode_replicate(node.shard, self.epoch, node.name, entries, store.seq, node.epoch_start, state,
                                    store.seq_epoch)

        kind = logmatch.choose_sync(known, known is not None and store.matches(known, known_epoch),
                                    store.seq, store.log.base_seq)
        if kind is SyncKind.HEARTBEAT:
            return req(), 0, kind.value
        if kind is SyncKind.LOG:
            entries = store.log.since(known, BATCH_BYTES)
            return req(entries), sum(len(e.payload) for e in entries), kind.value
        state, changed = store.export_state(0 if kind is SyncKind.SNAPSHOT else known)
        return req(state=state), changed, kind.value

    def _account(self, known: int | None, reply: ps_pb2.ReplicateReply, size: int, changed: int,
                 kind: str) -> None:
        """Count what it costs to bring a peer that is out of the ISR back (the sync metric)."""
        if self.peer in self.node.isr or kind == "heartbeat":
            return
        if self.catchup is None:
            self.catchup = {"src": self.node.name, "dst": self.peer, "shard": self.node.shard,
                            "from_seq": known or 0, "bytes": 0, "changed_bytes": 0, "kinds": [],
                            "snapshot_bytes": self.node.store.state_bytes(), "started": time.time()}
        c = self.catchup
        c["bytes"] += size
        c["changed_bytes"] += changed
        if kind not in c["kinds"]:
            c["kinds"].append(kind)
        self.node.metrics.sync_bytes.inc(size)

    def _finish_catchup(self, to_seq: int) -> None:
        c, self.catchup = self.catchup, None
        if c is None:
            return
        c["to_seq"] = to_seq
        c["kind"] = logmatch.catchup_kind(c["kinds"]).value
        c["duration_s"] = time.time() - c.pop("started")
        self.node.events.emit("sync", c)


class ReplicationManager:
    """Starts a sender per peer when the node becomes primary, stops them when it steps down."""

    def __init__(self, node: ShardNode) -> None:
        self.node = node
        self.senders: dict[str, PeerSender] = {}
        self.isr_lock = threading.Lock()
        self.pending_adds: dict[str, int] = {}       # peer -> epoch: in our ISR, not yet in etcd's
        self.pending_lock = threading.Lock()
        self.reconciler: threading.Thread | None = None
        node.on_promote = self.start
        node.on_step_down = self.stop

    def start(self) -> None:
        self.stop()
        node = self.node
        for peer in node.cfg.shard_nodes(node.shard):
            if peer != node.name:
                s = PeerSender(self, peer, node.epoch)
                self.senders[peer] = s
                s.start()

    def stop(self) -> None:
        for s in self.senders.values():
            s.stop.set()
        self.senders = {}
        with self.pending_lock:
            self.pending_adds.clear()

    def request_add(self, peer: str, epoch: int) -> None:
        """Store a caught-up peer (already in our ISR) in etcd's ISR, retrying while etcd is down.

        A thread of its own does it, so that an unreachable etcd never stalls replication."""
        with self.pending_lock:
            self.pending_adds[peer] = epoch
            if self.reconciler is None or not self.reconciler.is_alive():
                self.reconciler = threading.Thread(target=self._reconcile, name="isr-add", daemon=True)
                self.reconciler.start()

    def _reconcile(self) -> None:
        node = self.node
        deferred: set[tuple[str, int]] = set()
        while not node.stopping.is_set():
            with self.pending_lock:
                todo = dict(self.pending_adds)
                if not todo:
                    self.reconciler = None
                    return
            for peer, epoch in todo.items():
                stale = isrs.add_is_stale(node.is_primary(epoch), peer in node.isr)
                if stale or self.change_isr(add=peer, reason="caught up", attempts=1):
                    with self.pending_lock:
                        if self.pending_adds.get(peer) == epoch:
                            del self.pending_adds[peer]
                elif (peer, epoch) not in deferred:
                    deferred.add((peer, epoch))
                    node.events.emit("isr-deferred", {"shard": node.shard, "epoch": epoch, "added": peer,
                                                      "reason": "etcd did not take the add; retrying until it does"})
            node.stopping.wait(0.25)

    def change_isr(self, add: str | None = None, remove: str | None = None, reason: str = "",
                   attempts: int = 5) -> bool:
        """Compare-and-swap the shard record's ISR; True once etcd holds the change.

        Removal lands in etcd before it counts locally. An add is stored only while the peer is
        still in our own ISR (checked under the ISR lock, which local removals also hold), so etcd
        never names a member that our acks do not wait for."""
        node = self.node
        with self.isr_lock:
            if add and add not in node.isr:
                return False
            for _ in range(attempts):
                try:
                    kv = node.etcd.get(node.cfg.shard_key(node.shard))
                except Exception:
                    time.sleep(0.05)
                    continue
                if kv is None:
                    return False
                rec = ShardRecord.from_json(kv.value)
                if not fencing.names_me(rec.epoch, rec.primary, node.epoch, node.name):
                    node.fenced(f"shard record moved to epoch {rec.epoch} ({rec.primary})")
                    return False
                plan = isrs.change(rec.isr, add, remove, node.cfg.mode, node.cfg.min_isr)
                isr = plan.isr
                if plan.refused:
                    node.events.emit("isr-refused", {"shard": node.shard, "epoch": node.epoch, "isr": rec.isr,
                                                     "removed": remove, "min_isr": node.cfg.min_isr})
                    return False
                if isr == rec.isr:
                    break
                new = ShardRecord(rec.epoch, rec.primary, isr, rec.start_seq)
                try:
                    ok = node.etcd.cas(node.cfg.shard_key(node.shard), kv.mod_revision, new.to_json())
                except Exception:
                    time.sleep(0.05)
                    continue
                if ok:
                    break
            else:
                return False
            with node.cond:
                if remove and remove in node.isr:
                    node.isr.remove(remove)
                elif add and add not in node.isr:
                    node.isr.append(add)
                node.cond.notify_all()
            node.events.emit("isr", {"shard": node.shard, "epoch": node.epoch, "isr": list(node.isr),
                                     "added": add, "removed": remove, "reason": reason})
            return True
