"""A simulated copy's lease, bootstrap and elector: psnodes/replication/election.py as SimPy processes (same
etcd keys from pschaos.psnodes.config, same core calls, same order, same events), restore included: when
no ISR copy is alive, the live copies post what they hold and, after every ISR copy's lease
surely expired, the newest one restores from its own state or the shard's shared checkpoint.

procs.py (serve.py) holds one SimElector per copy; it sees the copy as state.py's CopyState and
the shard's other copies as Peers (probe.py asks them), never as the class that defines them.
"""
from __future__ import annotations

import json
from typing import Mapping

from pschaos.psnodes.elastic import retirement, routing
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.core import detector, fencing, lease, promotion
from pschaos.psnodes.core.promotion import Position
from pschaos.psnodes.replication.election import BOOTSTRAP_RETRY_S, CANDIDATE_POLL_S, DETECTOR_REPORT_S
from pschaos.psnodes.etcd import EtcdError

from pschaos.harness.backends.sim.rpc import Gen
from pschaos.harness.backends.sim.copy.probe import probe
from pschaos.harness.backends.sim.copy.state import CopyState, Peer


class SimElector:
    """Elector for one copy `c`: register and keep the lease, bootstrap, suspect, stand, restore."""

    def __init__(self, c: CopyState, peers: Mapping[str, Peer]) -> None:
        self.c, self.peers = c, peers
        self.fresh()
        self.credited: float | None = None     # the last_heard our last local-pause credit produced
        self.probed: float | None = None       # the last_heard of the silence we last probed in
        self.answered: float | None = None     # the last_heard of the silence the primary last answered in
        self.missed: tuple = (None, 0)         # (that silence, failed probe rounds in a row)
        self.last_probe: dict = {"ran": False}  # the last probe round, told in the `suspect` event
        self.late_excused: float | None = None  # the silence a late probe round was excused in
        self.probe_ended = 0.0                  # when the last probe round ended (virtual time)

    def fresh(self) -> None:
        """What serve.py's start sets anew at every (re)start of the copy. The silences already
        credited or probed (`credited`, `probed`, `answered`, `missed`, set once in __init__)
        carry over a restart, as they always have in the twin."""
        self.announced: tuple[str, bool] = ("", False)
        self.orphan_since: float | None = None
        self.posted: tuple[str, dict] | None = None     # our restore candidate: (key, value)
        self.next_report = 0.0                          # when the next `detector` event is due
        self.held_until = 0.0                           # a probe answered: no candidacy before this

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
                    gone = yield from c.ecall(lambda: retirement.retired_epoch(c.etcd, cfg, c.shard))
                    rec = ShardRecord(epoch=fencing.bootstrap_epoch(gone, c.store.seq_epoch), primary=c.name,
                                      isr=cfg.shard_nodes(c.shard), start_seq=c.store.seq)
                    ok = yield from c.ecall(lambda: c.etcd.cas(key, 0, rec.to_json(), also_put=[
                        (cfg.leader_key(c.shard), c.name, c.lease)]))
                    if ok:
                        c.become_primary(rec, bootstrap=True)
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
        """Elector.run: a primary checks etcd's silence every heartbeat (and the shard record
        while its replicas are silent), a replica its primary's silence when its detector would
        suspect (at most a heartbeat apart)."""
        c, cfg = self.c, self.c.cfg
        while c.alive:
            now = c.now()
            tick = cfg.heartbeat_s if c.role == "primary" else min(
                cfg.heartbeat_s, max(c.detector.wait(now, c.last_heard, cfg.heartbeat_s), self.held_until - now))
            start = c.now()
            yield from c.clock.sleep(tick)
            now = c.now()
            if detector.paused_locally(now - start, tick):
                self.paused(now, now - start - tick)        # a paused copy's elector (process._hold)
            if c.role == "primary":
                if lease.etcd_silent(now, c.lease_seen, cfg.lease_ttl_s):
                    c.lease_lost(f"etcd answered no keepalive for {cfg.lease_ttl_s}s")
                elif fencing.doubts_epoch(c.name, c.isr, c.peer_heard, now, cfg.suspect_floor_s):
                    yield from self.check_record()
                continue
            self.report(now)
            if now < self.held_until or not c.detector.suspects(now, c.last_heard):
                continue
            try:
                yield from self.suspect()
            except Exception as e:  # noqa: BLE001 - etcd unreachable: next tick
                c.emit("election-error", {"shard": c.shard, "error": str(e)})
                c.last_heard = lease.after_election_error(c.last_heard, c.now(), c.detector.silence_s(),
                                                          cfg.heartbeat_s)

    def paused(self, now: float, late: float) -> None:
        """Elector.paused: a replica moves the start of the silence forward by `late`, once per
        silence; either role says so."""
        c, credit = self.c, 0.0
        if c.role != "primary":
            moved = detector.after_local_pause(c.last_heard, now, late, self.credited)
            credit = 0.0 if moved is None else moved - c.last_heard
            if moved is not None:
                c.last_heard = self.credited = moved
        c.emit("local-pause", detector.pause_record(c.shard, c.epoch, c.role, late, credit, None, 0.0))

    def report(self, now: float) -> None:
        """Elector.report: a replica's `detector` event, at most every DETECTOR_REPORT_S."""
        c = self.c
        if now < self.next_report or not c.primary:
            return
        self.next_report = now + DETECTOR_REPORT_S
        stats = {**c.detector.stats(), "max_gap_ms": round(c.detector.take_max_gap() * 1000, 1)}
        c.emit("detector", {"shard": c.shard, "epoch": c.epoch, "primary": c.primary, **stats})

    def check_record(self) -> Gen:
        """Elector.check_record: a primary whose replicas went silent steps down once the shard
        record names someone else."""
        c, cfg = self.c, self.c.cfg
        try:
            kv = yield from c.ecall(lambda: c.etcd.get(cfg.shard_key(c.shard)))
        except Exception:  # noqa: BLE001 - etcd unreachable: the lease bound still holds
            return
        rec = ShardRecord.from_json(kv.value) if kv else None
        if rec is not None and c.role == "primary" and not fencing.names_me(rec.epoch, rec.primary, c.epoch, c.name):
            yield from c.fenced(f"shard record moved to epoch {rec.epoch} ({rec.primary}) while replicas were silent")

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
        if not c.detector.suspects(c.now(), c.last_heard):
            return                        # heard meanwhile
        self.last_probe = {"ran": False}
        held = yield from self.held_back(rec)
        if held:
            return
        yield from self.withdraw()
        now = c.now()
        if not c.detector.suspects(now, c.last_heard):
            return                        # the primary was heard meanwhile
        c.suspecting = rec.epoch
        c.emit("suspect", {"shard": c.shard, "epoch": rec.epoch, "primary": rec.primary, **c.detector.stats(),
                           "silent_ms": round((now - c.last_heard) * 1000, 1),
                           "probe": detector.probe_told(self.last_probe, self.probe_ended, now)})
        try:
            yield from self.stand(rec, kv.mod_revision)
        finally:
            c.suspecting = 0

    def held_back(self, rec: ShardRecord) -> Gen:
        """Elector.held_back: probe the primary (a Status call over each of `probe_paths` links to
        it at once, as pschaos.psnodes.replication.probe does) before standing; True when any answers as primary of
        `rec`'s epoch in time (detector.may_probe says when a probe runs)."""
        c, cfg = self.c, self.c.cfg
        now = c.now()
        heard = c.last_heard
        silent = now - heard
        if not detector.may_probe(cfg.detector, cfg.probe_s, silent, cfg.suspect_s,
                                  self.probed == heard, self.answered == heard, cfg.probe_hold_s):
            self.last_probe = {"ran": False}
            return False
        self.probed = heard               # set before the link is looked up, as Elector.held_back does
        wait = detector.probe_wait(cfg.probe_s, silent, cfg.suspect_s)
        dst = self.peers.get(rec.primary)
        if dst is None:                   # PrimaryProbe.clears: no link to the primary is no answer
            return self._round(rec, heard, silent, False, wait, now)
        answered = yield from probe(c, rec.primary, dst, now + wait,
                                    lambda reply: detector.probe_clears(reply.role, reply.epoch, rec.epoch))
        return self._round(rec, heard, silent, answered, wait, now)

    def _round(self, rec: ShardRecord, heard: float, silent: float, answered: bool, wait: float,
               asked: float) -> bool:
        """Elector.held_back's end, the same bookkeeping (detector.probe_round): held after an
        answer, or after a miss while the primary answered in this silence (fewer rounds than it
        takes failed in a row)."""
        c = self.c
        self.probe_ended = c.now()
        took = self.probe_ended - asked
        if detector.late_round(answered, wait, took, heard, self.late_excused, silent, c.cfg.probe_hold_s):
            self.late_excused, self.probed = heard, None      # a paused copy's round (process._hold)
            self.held_until = c.now() + c.cfg.heartbeat_s
            c.emit("probe-held", {"shard": c.shard, "epoch": rec.epoch, "primary": rec.primary,
                                  "silent_ms": round(silent * 1000, 1), "late_ms": round((took - wait) * 1000, 1)})
            return True
        self.missed, held, misses = detector.probe_round(self.missed, self.answered, heard, answered)
        self.last_probe = detector.probe_record(answered, wait, took, misses)
        if not held:
            return False
        if answered:
            self.answered = heard
        self.held_until = c.now() + c.cfg.heartbeat_s
        c.emit("probe-held", {"shard": c.shard, "epoch": rec.epoch, "primary": rec.primary,
                              "silent_ms": round(silent * 1000, 1), **({"missed": misses} if misses else {})})
        return True

    def stand(self, rec: ShardRecord, mod_revision: int) -> Gen:
        c, cfg = self.c, self.c.cfg
        me = {"seq": c.store.seq, "seq_epoch": c.store.seq_epoch}
        prefix = cfg.candidate_prefix(c.shard, rec.epoch)
        yield from c.ecall(lambda: c.etcd.put(prefix + c.name, json.dumps(me), lease=c.lease))
        c.emit("candidate", promotion.candidate_event(c.shard, rec.epoch, c.name, Position.of(me), rec.isr, rec.primary))
        end = c.now() + cfg.candidate_window_s
        while True:
            kvs = yield from c.ecall(lambda: c.etcd.get_prefix(prefix))
            posted = {kv.key[len(prefix):]: Position.of(json.loads(kv.value)) for kv in kvs}
            left = end - c.now()
            if left <= 0 or promotion.all_posted(c.name, posted, rec.isr, rec.primary):
                break
            yield from c.clock.sleep(min(left, CANDIDATE_POLL_S))
        won = promotion.elect(c.name, Position.of(me), posted, rec.isr, rec.primary)
        if won.winner != c.name:
            c.last_heard = c.now()
            return
        new = ShardRecord(epoch=rec.epoch + 1, primary=c.name, isr=won.isr, start_seq=c.store.seq)
        ok = yield from c.ecall(lambda: c.etcd.cas(cfg.shard_key(c.shard), mod_revision, new.to_json(),
                                                   also_put=[(cfg.leader_key(c.shard), c.name, c.lease)]))
        if ok and c.alive:
            c.emit("elected", promotion.elected_event(c.shard, new.epoch, c.name, Position.of(me), posted, rec.isr,
                                                      rec.primary))
            c.become_primary(new)
        else:
            c.last_heard = c.now()

    def maybe_restore(self, rec: ShardRecord, mod_revision: int) -> Gen:
        """Elector.maybe_restore: once no ISR copy has been alive for a lease TTL (plus a suspect
        period), the live copy with the newest state restores, by a compare-and-swap that also
        fails if an ISR copy came back meanwhile (its node key changed) or the routing record
        changed; the restored state then adopts that record before it serves."""
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
        loss = {"shard": c.shard, "epoch": new.epoch, "restored_seq": plan.seq,
                "restored_seq_epoch": plan.seq_epoch, "source": plan.source,
                **({"loaded": plan.loaded} if plan.loaded else {}),
                "previous_epoch": rec.epoch, "previous_primary": rec.primary, "time": c.clock.now()}
        route, route_rev = yield from c.ecall(lambda: routing.read(c.etcd, cfg))
        unchanged = [(cfg.node_key(n), keys[n].mod_revision if n in keys else 0) for n in rec.isr if n != c.name]
        won = yield from c.ecall(lambda: c.etcd.cas(
            cfg.shard_key(c.shard), mod_revision, new.to_json(),
            also_put=[(cfg.leader_key(c.shard), c.name, c.lease), (cfg.loss_key(c.shard, new.epoch), json.dumps(loss), 0)],
            also_compare=[*unchanged, (routing.key(cfg), route_rev)]))
        self.orphan_since = None
        if won:
            c.adopt_restore(plan, route, new.epoch)
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
