"""A simulated copy's lease, bootstrap and elector: psnodes/election.py as SimPy processes (same
etcd keys from psnodes.config, same core calls, same order, same events), restore included: when
no ISR copy is alive, the live copies post what they hold and, after every ISR copy's lease
surely expired, the newest one restores from its own state or the shard's shared checkpoint.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from psnodes.config import ShardRecord
from psnodes.core import fencing, lease, promotion
from psnodes.core.promotion import Position
from psnodes.election import BOOTSTRAP_RETRY_S
from psnodes.etcd import EtcdError

from .rpc import Gen

if TYPE_CHECKING:
    from .shard import SimCopy


class SimElector:
    """Elector for one copy `c`: register and keep the lease, bootstrap, suspect, stand, restore."""

    c: "SimCopy"
    announced: tuple[str, bool] = ("", False)
    orphan_since: float | None = None
    posted: tuple[str, dict] | None = None     # our restore candidate: (key, value)

    def register(self) -> Gen:
        c, cfg = self.c, self.c.cfg
        sent = c.now()
        c.lease = yield from c.ecall(lambda: c.etcd.grant(cfg.lease_ttl_s), timeout=1.0)
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
                ttl = yield from c.ecall(lambda: c.etcd.keepalive(c.lease),
                                         timeout=lease.keepalive_timeout(c.lease_until, sent, cfg.lease_ttl_s))
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
            try:
                kv = yield from c.ecall(lambda: c.etcd.get(key))
                if kv is None and c.slot == 0:
                    rec = ShardRecord(epoch=1, primary=c.name, isr=cfg.shard_nodes(c.shard), start_seq=c.store.seq)
                    ok = yield from c.ecall(lambda: c.etcd.cas(key, 0, rec.to_json(), also_put=[
                        (cfg.leader_key(c.shard), c.name, c.lease)]))
                    if ok:
                        c.become_primary(rec)
                        return
                    continue
            except EtcdError as e:          # Elector.bootstrap waits for etcd, as register does
                c.emit("election-error", {"shard": c.shard, "error": f"bootstrap: {e}"})
                yield from c.clock.sleep(BOOTSTRAP_RETRY_S)
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
            yield from self.maybe_restore(rec, kv.mod_revision)
            c.last_heard = c.now()
            return
        yield from self.withdraw()
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

    def maybe_restore(self, rec: ShardRecord, mod_revision: int) -> Gen:
        """Elector.maybe_restore: once no ISR copy has been alive for a lease TTL (plus a suspect
        period), the live copy with the newest state restores, by a compare-and-swap that also
        fails if an ISR copy came back meanwhile (its node key changed)."""
        c, cfg = self.c, self.c.cfg
        nodes = yield from c.ecall(lambda: c.etcd.get_prefix(cfg.prefix + "nodes/"))
        keys = {kv.key.rsplit("/nodes/", 1)[1]: kv for kv in nodes}
        announced = {n: json.loads(keys[n].value) for n in rec.isr if n in keys and n != c.name}
        if promotion.isr_copy_alive(c.name, rec.isr, announced):
            yield from self.withdraw()
            return
        prefix = cfg.restore_prefix(c.shard, rec.epoch)
        me = {"seq": c.store.seq, "seq_epoch": c.store.seq_epoch}
        if self.posted != (prefix + c.name, me):
            yield from c.ecall(lambda: c.etcd.put(prefix + c.name, json.dumps(me), lease=c.lease))
            self.posted = (prefix + c.name, me)
        now = c.now()
        phase = promotion.orphan_phase(self.orphan_since, now, cfg.lease_ttl_s, cfg.suspect_s)
        if phase is promotion.Orphan.START:
            self.orphan_since = now
            return
        if phase is promotion.Orphan.WAIT:
            return
        live = [n for n in keys if n.startswith(f"shard-{c.shard}/")]
        kvs = yield from c.ecall(lambda: c.etcd.get_prefix(prefix))
        posted = {kv.key[len(prefix):]: Position.of(json.loads(kv.value)) for kv in kvs}
        best = promotion.restorer(c.name, Position.of(me), posted, live, now - self.orphan_since,
                                  cfg.lease_ttl_s, cfg.suspect_s)
        if best != c.name:
            return    # None: a live copy has not said what it holds yet; else the newest restores
        plan = c.plan_restore()
        new = ShardRecord(epoch=rec.epoch + 1, primary=c.name, isr=[c.name], start_seq=plan.seq)
        loss = {"shard": c.shard, "epoch": new.epoch, "restored_seq": plan.seq, "source": plan.source,
                "previous_epoch": rec.epoch, "previous_primary": rec.primary, "time": c.clock.now()}
        unchanged = [(cfg.node_key(n), keys[n].mod_revision if n in keys else 0) for n in rec.isr if n != c.name]
        won = yield from c.ecall(lambda: c.etcd.cas(
            cfg.shard_key(c.shard), mod_revision, new.to_json(),
            also_put=[(cfg.leader_key(c.shard), c.name, c.lease), (cfg.loss_key(c.shard, new.epoch), json.dumps(loss), 0)],
            also_compare=unchanged))
        self.orphan_since = None
        if won:
            c.adopt_restore(plan)
            c.emit("restore", loss)
            c.become_primary(new)
            yield from self.withdraw()

    def withdraw(self) -> Gen:
        """Forget the orphan wait and take back our restore candidate, if we posted one."""
        c = self.c
        self.orphan_since = None
        if self.posted is not None:
            key, self.posted = self.posted[0], None
            try:
                yield from c.ecall(lambda: c.etcd.delete(key))
            except Exception:  # noqa: BLE001 - it goes with our lease anyway
                pass
