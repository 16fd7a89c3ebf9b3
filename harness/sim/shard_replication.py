"""A simulated primary's replication: psnodes/replication.py's PeerSender and ISR changes as
SimPy processes (same core calls, same order, `yield from` where the real threads block).

Each sender ships whatever its peer lacks, one call in flight (log entries, a delta or a
snapshot, as psnodes.core.logmatch chooses; heartbeats when there is nothing), over SimNetwork.
A peer silent for suspect_s leaves the ISR in etcd before it leaves the primary's own; a peer
that caught up joins the primary's ISR at once and etcd's after, retried until it lands.
"""
from __future__ import annotations

from psnodes.config import ShardRecord
from psnodes.core import fencing, isr as isrs, logmatch
from psnodes.core.logmatch import SyncKind
from psnodes.errors import StaleEpoch

from .rpc import Gen, SimRpcError, call
from .shard import ReplicateReq, SimCopy

REPLY_BYTES = 32
BATCH_BYTES = 16 << 20


class SimReplication:
    """ReplicationManager for one copy `c`; `peers` maps names to every SimCopy of the shard."""

    c: SimCopy
    peers: dict[str, SimCopy]

    def start_senders(self) -> None:
        c = self.c
        for peer in c.cfg.shard_nodes(c.shard):
            if peer != c.name:
                c.spawn(self.sender(peer, c.epoch))

    def sender(self, peer: str, epoch: int) -> Gen:
        """PeerSender.run: ship what the peer lacks, one call in flight; heartbeats when idle."""
        c, cfg = self.c, self.c.cfg
        known: int | None = None
        known_epoch = 0
        last_ok = c.now()
        next_shrink = 0.0
        while c.is_primary(epoch):
            if known is not None and known >= c.store.seq:
                yield from c.wait_change(cfg.heartbeat_s)
            if not c.is_primary(epoch):
                break
            req = self._build(epoch, known, known_epoch)
            sent = c.now()
            dst = self.peers[peer]
            try:
                reply = yield from call(c.net, c.name, peer, lambda: dst.alive, lambda: dst.replicate(req),
                                        req.nbytes(), lambda _r: REPLY_BYTES, sent + cfg.rpc_timeout_s)
            except StaleEpoch as e:
                yield from c.fenced(f"{peer}: {e}")
                break
            except SimRpcError as e:
                known = None
                now = c.now()
                if isrs.should_drop(now, last_ok, cfg.suspect_s, peer in c.isr, next_shrink):
                    ok = yield from self.change_isr(remove=peer, reason=f"no answer for {cfg.suspect_s}s: {e.status}")
                    if not ok:
                        next_shrink = now + 1.0
                yield from c.clock.sleep(cfg.heartbeat_s)
                continue
            last_ok = c.now()
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
                c.spawn(self.add_to_record(peer, epoch))

    def _build(self, epoch: int, known: int | None, known_epoch: int) -> ReplicateReq:
        c, store = self.c, self.c.store

        def req(entries=(), state: bytes = b"") -> ReplicateReq:
            return ReplicateReq(c.shard, epoch, c.name, list(entries), store.seq, c.epoch_start, state,
                                store.seq_epoch)

        kind = logmatch.choose_sync(known, known is not None and store.matches(known, known_epoch),
                                    store.seq, store.log.base_seq)
        if kind is SyncKind.HEARTBEAT:
            return req()
        if kind is SyncKind.LOG:
            return req(store.log.since(known, BATCH_BYTES))
        state, _ = store.export_state(0 if kind is SyncKind.SNAPSHOT else known)
        return req(state=state)

    def add_to_record(self, peer: str, epoch: int) -> Gen:
        """ReplicationManager._reconcile for one peer: retry the etcd add until it lands or is stale."""
        c = self.c
        while c.alive:
            if isrs.add_is_stale(c.is_primary(epoch), peer in c.isr):
                return
            ok = yield from self.change_isr(add=peer, reason="caught up", attempts=1)
            if ok:
                return
            yield from c.clock.sleep(0.25)

    def change_isr(self, add: str | None = None, remove: str | None = None, reason: str = "",
                   attempts: int = 5) -> Gen:
        """ReplicationManager.change_isr: CAS the record's ISR; removal lands in etcd first."""
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
