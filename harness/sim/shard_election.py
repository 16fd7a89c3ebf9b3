"""A simulated copy's lease, bootstrap and elector: psnodes/election.py as SimPy processes (same
etcd keys from psnodes.config, same core calls, same order).

Simplification, named: the restore path of election.py (`maybe_restore`, when every ISR copy is
lost) is not modelled yet; a copy that is not eligible only waits another suspect period.
"""
from __future__ import annotations

import json

from psnodes.config import ShardRecord
from psnodes.core import fencing, lease, promotion
from psnodes.core.promotion import Position

from .rpc import Gen
from .shard import SimCopy


class SimElector:
    """Elector for one copy `c`: register and keep the lease, bootstrap, suspect and stand."""

    c: SimCopy
    announced: tuple[str, bool] = ("", False)

    def register(self) -> Gen:
        c, cfg = self.c, self.c.cfg
        sent = c.now()
        c.lease = yield from c.ecall(lambda: c.etcd.grant(cfg.lease_ttl_s))
        c.renew_lease(sent, cfg.lease_ttl_s)
        yield from self.announce()

    def announce(self) -> Gen:
        c = self.c
        self.announced = (c.role, c.in_sync)
        value = json.dumps({"role": c.role, "in_sync": c.in_sync})
        yield from c.ecall(lambda: c.etcd.put(c.cfg.node_key(c.name), value, lease=c.lease))

    def keepalive(self) -> Gen:
        c, cfg = self.c, self.c.cfg
        period = cfg.lease_ttl_s / 6
        while c.alive:
            yield from c.clock.sleep(period)
            sent = c.now()
            try:
                ttl = yield from c.ecall(lambda: c.etcd.keepalive(c.lease))
                if ttl <= 0:
                    c.lease_lost("the etcd lease expired")
                    yield from self.register()
                else:
                    c.renew_lease(sent, min(ttl, cfg.lease_ttl_s))
                    if self.announced != (c.role, c.in_sync):
                        yield from self.announce()
                period = cfg.lease_ttl_s / 6
            except Exception:  # noqa: BLE001 - etcd unreachable: soon again, the lease bound holds
                period = 0.05

    def bootstrap(self) -> Gen:
        c, cfg = self.c, self.c.cfg
        key = cfg.shard_key(c.shard)
        while c.alive:
            kv = yield from c.ecall(lambda: c.etcd.get(key))
            if kv is None and c.slot == 0:
                rec = ShardRecord(epoch=1, primary=c.name, isr=cfg.shard_nodes(c.shard), start_seq=c.store.seq)
                ok = yield from c.ecall(lambda: c.etcd.cas(key, 0, rec.to_json(), also_put=[
                    (cfg.leader_key(c.shard), c.name, c.lease)]))
                if ok:
                    c.become_primary(rec)
                    return
                continue
            if kv is None:
                yield from c.clock.sleep(0.05)
                continue
            rec = ShardRecord.from_json(kv.value)
            c.follow(rec.epoch, rec.primary if rec.primary != c.name else "", rec.start_seq)
            c.last_heard = c.now()
            return

    def elector(self) -> Gen:
        """Elector.run: every heartbeat, a primary checks etcd's silence, a replica its primary's."""
        c, cfg = self.c, self.c.cfg
        while c.alive:
            yield from c.clock.sleep(cfg.heartbeat_s)
            if c.role == "primary":
                if lease.etcd_silent(c.now(), c.lease_seen, cfg.lease_ttl_s):
                    c.lease_lost(f"etcd answered no keepalive for {cfg.lease_ttl_s}s")
                continue
            if not lease.suspects(c.now(), c.last_heard, cfg.suspect_s):
                continue
            try:
                yield from self.suspect()
            except Exception as e:  # noqa: BLE001 - etcd unreachable: next tick
                c.emit("election-error", {"shard": c.shard, "error": str(e)})
                c.last_heard = lease.after_election_error(c.last_heard, c.now(), cfg.suspect_s, cfg.heartbeat_s)

    def suspect(self) -> Gen:
        c, cfg = self.c, self.c.cfg
        kv = yield from c.ecall(lambda: c.etcd.get(cfg.shard_key(c.shard)))
        if kv is None:
            return
        rec = ShardRecord.from_json(kv.value)
        if fencing.follow_record(rec.epoch, c.epoch, rec.primary, c.name):
            c.follow(rec.epoch, rec.primary, rec.start_seq)
            return
        if not promotion.eligible(c.name, rec.isr, c.in_sync):
            c.last_heard = c.now()        # restore path not modelled (module docstring)
            return
        if not lease.suspects(c.now(), c.last_heard, cfg.suspect_s):
            return                        # the primary was heard meanwhile
        c.suspecting = rec.epoch
        try:
            yield from self.stand(rec, kv.mod_revision)
        finally:
            c.suspecting = 0

    def stand(self, rec: ShardRecord, mod_revision: int) -> Gen:
        c, cfg = self.c, self.c.cfg
        me = {"seq": c.store.seq, "seq_epoch": c.store.seq_epoch}
        prefix = cfg.candidate_prefix(c.shard, rec.epoch)
        yield from c.ecall(lambda: c.etcd.put(prefix + c.name, json.dumps(me), lease=c.lease))
        yield from c.clock.sleep(cfg.candidate_window_s)
        kvs = yield from c.ecall(lambda: c.etcd.get_prefix(prefix))
        posted = {kv.key[len(prefix):]: Position.of(json.loads(kv.value)) for kv in kvs}
        won = promotion.elect(c.name, Position.of(me), posted, rec.isr, rec.primary)
        if won.winner != c.name:
            c.last_heard = c.now()
            return
        new = ShardRecord(epoch=rec.epoch + 1, primary=c.name, isr=won.isr, start_seq=c.store.seq)
        ok = yield from c.ecall(lambda: c.etcd.cas(cfg.shard_key(c.shard), mod_revision, new.to_json(),
                                                   also_put=[(cfg.leader_key(c.shard), c.name, c.lease)]))
        if ok and c.alive:
            c.become_primary(new)
        else:
            c.last_heard = c.now()
