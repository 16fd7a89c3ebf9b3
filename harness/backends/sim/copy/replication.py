"""Replication in the twin: psnodes/replication/replication.py's PeerSender and ISR changes as SimPy
processes, and node.py's replicate handler (same core calls, same order, same events).

Each sender ships whatever its peer lacks, one call in flight (log entries, a delta or a
snapshot, as pschaos.psnodes.core.logmatch chooses; heartbeats when there is nothing), over SimNetwork.
A peer silent for suspect_s leaves the ISR in etcd before it leaves the primary's own (a call
still in flight then is looked at, as PeerSender._await does: the peer is probed on its paths,
probe.py, and dropped only if none answers); a peer
that caught up joins the primary's ISR at once and etcd's after, retried until it lands
("isr-deferred" once when etcd did not take it); what bringing it back cost is one "sync" event.

The copy (copy.py) owns its ReplicaSide, procs.py (serve.py) its SimReplication; both see the
copy as state.py's CopyState and the shard's other copies as Peers, so neither imports the class
that defines them.
"""
from __future__ import annotations

import math
from typing import Mapping

import simpy

from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core import fencing, isr as isrs, logmatch
from pschaos.psnodes.core.logmatch import SyncKind
from pschaos.psnodes.errors import NotPrimary, PSError, StaleEpoch

from pschaos.harness.backends.sim.reconnect import ReconnectBackoff
from pschaos.harness.backends.sim.rpc import DEADLINE_MARGIN_S, Gen, SimRpcError, call
from pschaos.harness.backends.sim.copy.probe import probe
from pschaos.harness.backends.sim.copy.state import CopyState, Peer
from pschaos.harness.backends.sim.copy.values import ReplicateReply, ReplicateReq

REPLY_BYTES = 32
BATCH_BYTES = 16 << 20


def _outcome(gen: Gen) -> Gen:
    """The call's (reply, None) or (None, error): its process never fails, so the sender can
    stop waiting on it (to look at a silent peer) and collect the result later."""
    try:
        return (yield from gen), None
    except PSError as e:
        return None, e


class ReplicaSide:
    """node.py's replicate handler, for the copy `c` that owns it."""

    def __init__(self, c: CopyState) -> None:
        self.c = c

    def replicate(self, req: ReplicateReq, deadline: float) -> Gen:
        """`reply = yield from copy.replicate(req, deadline)`, as a call into the copy."""
        c = self.c
        # the real replica's CPU beyond the call's, per Replicate with entries: per call, not per
        # entry (a catch-up batch of hundreds is one call's threads and switches)
        work = c.replicate_work(req.nbytes()) + (c.replicate_extra_s if req.entries else 0.0)
        if req.entries:
            c.replicate_load[0] += 1
            c.replicate_load[1] += len(req.entries)
        return (yield from c.serve(lambda: self._replicate(req), deadline, work=work, work_after=True))

    def _replicate(self, req: ReplicateReq) -> Gen:
        """A new sender confirmed by etcd's record (remembered in `verified`), the fencing verdict,
        then ShardStore.take_replicated: everything checked before anything is taken."""
        c = self.c
        c.check_shard(req.shard, "Replicate")
        why = fencing.self_refusal(c.name, req.primary)
        if why:
            raise StaleEpoch(why)
        verdict = fencing.on_replicate(c.epoch, c.role, c.primary, req.epoch, req.primary)
        if verdict is fencing.Replicate.FOLLOW and (req.epoch, req.primary) not in c.verified:
            try:
                kv = yield from c.ecall(lambda: c.etcd.get(c.cfg.shard_key(c.shard)))
            except Exception as e:  # noqa: BLE001 - no etcd, no proof of who leads that epoch
                raise NotPrimary(f"replicate from {req.primary} at epoch {req.epoch}: etcd could not confirm "
                                 f"the shard record ({e}); retry") from None
            rec = ShardRecord.from_json(kv.value) if kv else None
            why = fencing.sender_refusal(rec.epoch if rec else None, rec.primary if rec else None,
                                         req.epoch, req.primary)
            if why:
                raise StaleEpoch(f"replicate from {req.primary} at epoch {req.epoch} refused by {c.name}: {why}")
            c.verified.add((req.epoch, req.primary))
            verdict = fencing.on_replicate(c.epoch, c.role, c.primary, req.epoch, req.primary)
        why = fencing.replicate_refusal(verdict, c.name, c.epoch, req.epoch, req.primary)
        if why:
            raise StaleEpoch(why)
        if verdict is fencing.Replicate.FOLLOW and (req.epoch, req.primary) not in c.verified:
            raise NotPrimary(f"replicate from {req.primary} at epoch {req.epoch}: the shard record "
                             "changed while it was checked; retry")
        # as node.py: everything sent is checked before anything changes, the role included
        plan = c.store.plan_replicated(req.state, req.entries, req.epoch)
        if verdict is fencing.Replicate.FOLLOW:
            c.follow(req.epoch, req.primary, req.epoch_start)
        c.last_heard = c.now()
        c.detector.heard(c.last_heard)
        c.in_sync = c.store.take_plan(plan, req.primary_seq, req.primary_seq_epoch, c.in_sync)
        c.notify()
        return ReplicateReply(c.store.seq, c.epoch, fencing.suspecting(c.suspecting, req.epoch),
                              c.store.seq_epoch)


class SimReplication:
    """ReplicationManager for one copy `c`; `peers` maps names to every copy of the shard."""

    def __init__(self, c: CopyState, peers: Mapping[str, Peer]) -> None:
        self.c, self.peers = c, peers
        self.deferred: set[tuple[str, int]] = set()   # (peer, epoch) adds "isr-deferred" was emitted for

    def start_senders(self) -> None:
        c = self.c
        for peer in c.cfg.shard_nodes(c.shard):
            if peer != c.name:
                c.spawn(self.sender(peer, c.epoch))

    def sender(self, peer: str, epoch: int) -> Gen:
        """PeerSender.run: ship what the peer lacks, one call in flight; heartbeats when idle. Its
        calls go over a channel of its own (PeerSender dials one per peer and epoch) with gRPC's
        reconnect backoff (reconnect.py): once a connection attempt was refused, calls fail at
        once until an attempt finds the peer serving, unpaused, and its link open."""
        c, dst = self.c, self.peers[peer]
        chan = ReconnectBackoff(c.env, c.net.stream(f"reconnect:{c.name}:{c.incarnation}:{peer}:{epoch}"),
                                lambda: dst.alive and dst.accepting and not dst.paused
                                and not c.net.blocks(c.name, peer))
        try:
            yield from self._send(peer, epoch, dst, chan)
        finally:
            chan.close()

    def _send(self, peer: str, epoch: int, dst: Peer, chan: ReconnectBackoff) -> Gen:
        c, cfg = self.c, self.c.cfg
        known: int | None = None
        known_epoch = 0
        catchup: dict | None = None
        last_ok = c.now()
        last_sent = -math.inf
        shrink = [0.0]           # PeerSender.next_shrink: a refused or failed removal is retried no sooner
        call_s = 0.0             # the last answered call's time: probe_wait's floor
        while c.is_primary(epoch):
            while c.is_primary(epoch):
                wait = logmatch.idle_wait(known, c.store.seq, last_sent, c.now(), cfg.heartbeat_s)
                if wait <= 0:
                    break
                yield from c.wait_change(wait)
            if not c.is_primary(epoch):
                break
            req, changed, kind = self._build(epoch, known, known_epoch)
            sent = last_sent = c.now()
            if not chan.usable():              # in its reconnect backoff: gRPC fails the call at once
                known = None
                yield from self._drop_if_silent(peer, epoch, last_ok, shrink, "UNAVAILABLE")
                yield from c.clock.sleep(cfg.heartbeat_s)
                continue
            inflight = c.spawn(_outcome(call(c.net, c.name, peer, lambda: dst.alive,
                                             lambda: dst.replicate(req, sent + cfg.rpc_timeout_s - DEADLINE_MARGIN_S),
                                             req.nbytes(), lambda _r: REPLY_BYTES, sent + cfg.rpc_timeout_s,
                                             c.cpu, c.send_s, closed_at=lambda: dst.closed_at)))
            try:
                reply = yield from self._await(inflight, peer, epoch, last_ok, shrink, call_s)
            except StaleEpoch as e:
                yield from c.fenced(f"{peer}: {e}")
                break
            except PSError as e:     # any other refusal, as PeerSender takes every grpc.RpcError
                known = None
                # refused (the peer down or not serving yet, or its link refusing connections):
                # a connected channel goes idle, an idle one starts its reconnect attempts
                chan.failed(refused=not (dst.alive and dst.accepting) or c.net.refuses(c.name, peer))
                yield from self._drop_if_silent(peer, epoch, last_ok, shrink, e.status if isinstance(e, SimRpcError)
                                                else e.code.name)
                yield from c.clock.sleep(cfg.heartbeat_s)
                continue
            chan.ok()
            last_ok = c.now()
            call_s = last_ok - sent
            catchup = self._account(catchup, peer, known, req.nbytes(), changed, kind)
            known, known_epoch = reply.applied_seq, reply.seq_epoch
            if fencing.renews_follower_lease(reply.epoch, epoch, reply.suspecting):
                c.peer_heard[peer] = max(c.peer_heard.get(peer, sent), sent)
                c.notify()
            matched = c.store.matches(known, known_epoch)
            if matched:
                c.peer_seq[peer] = known
                c.notify()
            if isrs.should_readd(logmatch.caught_up(known, matched, c.store.seq), peer in c.isr):
                c.isr.append(peer)              # conservative first: waits include it at once
                c.notify()
                catchup = self._finish_catchup(catchup, known)
                c.spawn(self.add_to_record(peer, epoch))

    def _await(self, inflight: simpy.Process, peer: str, epoch: int, last_ok: float, shrink: list[float],
               call_s: float) -> Gen:
        """PeerSender._await: the call's reply (its error raised); while it is in flight past
        suspect_s of silence an in-sync peer is probed: an answer holds it (isr.probe_hold), none
        drops it from the ISR."""
        c, cfg = self.c, self.c.cfg
        held = 0.0
        while True:
            if peer in c.isr and c.is_primary(epoch) and not c.stopping:
                due = max(isrs.drop_due(last_ok, cfg.suspect_s, shrink[0]), held)
                yield inflight | c.env.timeout(max(0.0, due - c.now()))
            else:
                yield inflight
            if inflight.triggered:
                if inflight.value is None:       # this copy went down under it: its kill ends this
                    yield c.env.event()          # sender too (ProcessControl._exit), so wait for that
                reply, err = inflight.value
                if err is not None:
                    raise err
                return reply
            deadline = c.now() + isrs.probe_wait(cfg.probe_s, cfg.suspect_s, call_s)
            if (yield from probe(c, peer, self.peers[peer], deadline, lambda _reply: True)):
                held = c.now() + isrs.probe_hold(cfg.probe_s, cfg.heartbeat_s)
                c.emit("isr-held", {"shard": c.shard, "epoch": epoch, "peer": peer,
                                    "silent_ms": round((c.now() - last_ok) * 1000, 1)})
            elif not inflight.triggered:
                yield from self._drop_if_silent(peer, epoch, last_ok, shrink,
                                                "no answer to the call in flight or to a probe")

    def _drop_if_silent(self, peer: str, epoch: int, last_ok: float, shrink: list[float], why: str) -> Gen:
        """PeerSender._drop_if_silent: drop the peer once it answered nothing for suspect_s,
        while this copy is still the epoch's primary."""
        c, cfg, now = self.c, self.c.cfg, self.c.now()
        if not c.is_primary(epoch) or c.stopping:
            return
        if isrs.should_drop(now, last_ok, cfg.suspect_s, peer in c.isr, shrink[0]):
            if not (yield from self.change_isr(remove=peer, reason=f"no answer for {cfg.suspect_s}s: {why}")):
                shrink[0] = now + 1.0

    def _build(self, epoch: int, known: int | None, known_epoch: int) -> tuple[ReplicateReq, int, str]:
        """What to send now: heartbeat, entries, a delta or a snapshot; its changed bytes; its kind."""
        c, store = self.c, self.c.store

        def req(entries=(), state: bytes = b"") -> ReplicateReq:
            return ReplicateReq(c.shard, epoch, c.name, list(entries), store.seq, c.epoch_start, state,
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

    def _account(self, catchup: dict | None, peer: str, known: int | None, size: int, changed: int,
                 kind: str) -> dict | None:
        """PeerSender._account: what bringing a peer that is out of the ISR back costs."""
        c = self.c
        if peer in c.isr or kind == "heartbeat":
            return catchup
        if catchup is None:
            catchup = {"src": c.name, "dst": peer, "shard": c.shard, "from_seq": known or 0, "bytes": 0,
                       "changed_bytes": 0, "kinds": [], "snapshot_bytes": c.store.state_bytes(),
                       "started": c.clock.now()}
        catchup["bytes"] += size
        catchup["changed_bytes"] += changed
        if kind not in catchup["kinds"]:
            catchup["kinds"].append(kind)
        return catchup

    def _finish_catchup(self, catchup: dict | None, to_seq: int) -> None:
        """PeerSender._finish_catchup: the "sync" event, once the peer is back in the ISR."""
        if catchup is None:
            return None
        catchup["to_seq"] = to_seq
        catchup["kind"] = logmatch.catchup_kind(catchup["kinds"]).value
        catchup["duration_s"] = self.c.clock.now() - catchup.pop("started")
        self.c.emit("sync", catchup)
        return None

    def add_to_record(self, peer: str, epoch: int) -> Gen:
        """ReplicationManager._reconcile for one peer: retry the etcd add until it lands or is stale."""
        c = self.c
        while c.alive:
            if isrs.add_is_stale(c.is_primary(epoch), peer in c.isr):
                return
            ok = yield from self.change_isr(add=peer, reason="caught up", attempts=1)
            if ok:
                return
            if (peer, epoch) not in self.deferred:
                self.deferred.add((peer, epoch))
                c.emit("isr-deferred", {"shard": c.shard, "epoch": epoch, "added": peer,
                                        "reason": "etcd did not take the add; retrying until it does"})
            yield from c.clock.sleep(0.25)

    def change_isr(self, add: str | None = None, remove: str | None = None, reason: str = "",
                   attempts: int = 5) -> Gen:
        """ReplicationManager.change_isr: CAS the record's ISR; removal lands in etcd first. One
        change at a time (the real manager's isr_lock): an add read before a removal landed
        would otherwise write back the peer the removal took out."""
        with self.c.isr_lock.request() as turn:
            yield turn
            return (yield from self._change_isr(add, remove, reason, attempts))

    def _change_isr(self, add: str | None, remove: str | None, reason: str, attempts: int) -> Gen:
        c, cfg = self.c, self.c.cfg
        if add and add not in c.isr:
            return False
        key = cfg.shard_key(c.shard)
        for _ in range(attempts):
            try:
                kv = yield from c.ecall(lambda: c.etcd.get(key))
            except Exception:  # noqa: BLE001 - etcd unreachable: try again
                yield from c.clock.sleep(0.05)
                continue
            if kv is None:
                return False
            rec = ShardRecord.from_json(kv.value)
            if not fencing.names_me(rec.epoch, rec.primary, c.epoch, c.name):
                yield from c.fenced(f"shard record moved to epoch {rec.epoch} ({rec.primary})")
                return False
            plan = isrs.change(rec.isr, add, remove, cfg.mode, cfg.min_isr)
            if plan.refused:
                c.emit("isr-refused", {"shard": c.shard, "epoch": c.epoch, "isr": rec.isr, "removed": remove,
                                       "min_isr": cfg.min_isr})
                return False
            if plan.isr == rec.isr:
                break
            new = ShardRecord(rec.epoch, rec.primary, plan.isr, rec.start_seq)
            try:
                ok = yield from c.ecall(lambda: c.etcd.cas(key, kv.mod_revision, new.to_json()))
            except Exception:  # noqa: BLE001
                yield from c.clock.sleep(0.05)
                continue
            if ok:
                break
        else:
            return False
        if remove and remove in c.isr:
            c.isr.remove(remove)
        elif add and add not in c.isr:
            c.isr.append(add)
        c.notify()
        c.emit("isr", {"shard": c.shard, "epoch": c.epoch, "isr": list(c.isr), "added": add,
                       "removed": remove, "reason": reason})
        return True
