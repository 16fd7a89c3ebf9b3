"""Failure detection and promotion: who serves a shard after its primary dies or freezes.

etcd's lease TTL has a floor of about 1.5 s, too slow to wait for; so a replica suspects its
primary when the replication stream (heartbeats every `heartbeat_s`) has been silent for as long
as its failure detector asks (pschaos.psnodes.core.detector: phi accrual over the gaps it has seen,
never under `phi_floor_s`; or a fixed `suspect_s`). The elector sleeps until that moment (at
most a heartbeat), not a whole heartbeat past it. Suspecting replicas that are in the ISR post
their (epoch, seq) as candidates and wait a short window, closed early once every ISR copy that
may stand has posted; the most up-to-date one compare-and-swaps the shard record to the next
epoch. The swap is the only way to become primary, and fencing by epoch makes an early swap
safe: a frozen old primary that wakes finds every replica refusing its epoch and steps down. A
primary whose replicas went silent for the floor reads the record every heartbeat, so one cut
off from them steps down as soon as a successor exists (its waiting pushes then fail over).

When no copy in the ISR is alive at all (their etcd leases expired), the live copies post what
they hold and the one with the newest state (by epoch of its last entry, then seq) restores: its
own state or the shard's shared checkpoint, whichever is newer, under a new epoch. Its state
changes only once its compare-and-swap won; the loss is written to etcd and to the event log,
never hidden. The swap also compares the routing record, which the restored state is then made to
agree with before it serves (a state from before a migration's fence or switch would ack keys that
moved away: pschaos.psnodes.core.routing.after_restore).

The lease is also what bounds a primary: it acks only while its lease cannot have expired
(`ShardNode.lease_until`, renewed here from the send time of each successful keepalive) and steps
down once it may have, so that a copy restoring after that expiry never overlaps with its acks.
"""
from __future__ import annotations

import json
import threading
import time

from pschaos.psnodes.elastic import retirement, routing
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.etcd import EtcdError
from pschaos.psnodes.core import detector, fencing, lease, promotion
from pschaos.psnodes.core.promotion import Position
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.replication.probe import PrimaryProbe


BOOTSTRAP_RETRY_S = 0.2       # as serve.py waits for etcd before register()
DETECTOR_REPORT_S = 1.0       # a replica's `detector` event, at most this often
CANDIDATE_POLL_S = 0.01       # how often a candidate looks for the others within its window


class Elector(threading.Thread):
    def __init__(self, node: ShardNode) -> None:
        super().__init__(name="elector", daemon=True)
        self.node = node
        self.orphan_since: float | None = None
        self.announced: tuple[str, bool] = ("", False)
        self.posted: tuple[str, dict] | None = None     # our restore candidate: (key, value)
        self.next_report = 0.0
        self.probe = PrimaryProbe(node)
        self.held_until = 0.0          # a probe answered: no new one (and no candidacy) before this
        self.credited: float | None = None   # the last_heard our last local-pause credit produced
        self.probed: float | None = None     # the last_heard of the silence we last probed in
        self.answered: float | None = None   # the last_heard of the silence the primary last answered in
        self.missed: tuple[float | None, int] = (None, 0)   # (that silence, failed probe rounds in a row)
        self.last_probe: dict = {"ran": False}   # the last probe round, told in the `suspect` event
        self.late_excused: float | None = None   # the last_heard of the silence a late probe round was excused in
        self.probe_ended = 0.0                   # when the last probe round ended (monotonic)

    # -------------------------------------------------------------- lease
    def register(self) -> None:
        """Take a lease and announce this node under it (its liveness for the all-lost check)."""
        node, cfg = self.node, self.node.cfg
        sent = time.monotonic()
        node.lease = node.etcd.grant(cfg.lease_ttl_s, timeout=1.0)
        node.renew_lease(sent, cfg.lease_ttl_s)
        self.announce()

    def keepalive_timeout(self, sent: float) -> float:
        """As long as the lease may still live: a slow answer renews it all the same (from the send
        time), and a loaded etcd is no reason to give a lease up; never under half a second."""
        return lease.keepalive_timeout(self.node.lease_until, sent, self.node.cfg.lease_ttl_s)

    def announce(self) -> None:
        """Publish role and in-sync state under the lease: a restarted copy says it is not in sync."""
        node = self.node
        self.announced = (node.role, node.in_sync)
        node.etcd.put(node.cfg.node_key(node.name), json.dumps({"role": node.role, "in_sync": node.in_sync}),
                      lease=node.lease)

    def keepalive(self) -> None:
        """Renew the lease every TTL/6 (soon again after a failure). The primary stops acking when
        the lease may have expired (`ShardNode.lease_until`) and steps down when no keepalive was
        answered for a whole TTL (`run`). One whose lease did expire re-registers as a replica: a
        copy may have restored the shard in between, so it must win an election again."""
        node, cfg = self.node, self.node.cfg
        period = cfg.lease_ttl_s / 6
        while not node.stopping.wait(period):
            sent = time.monotonic()
            try:
                ttl = node.etcd.keepalive(node.lease, timeout=self.keepalive_timeout(sent))
                if ttl <= 0:
                    node.lease_lost("the etcd lease expired")
                    self.register()
                else:
                    node.renew_lease(sent, min(ttl, cfg.lease_ttl_s))
                    if self.announced != (node.role, node.in_sync):
                        self.announce()
                period = cfg.lease_ttl_s / 6
            except Exception:
                period = 0.05    # etcd unreachable or slow: try again soon, the lease bound still holds

    # ------------------------------------------------------------ bootstrap
    def bootstrap(self) -> None:
        """Create the shard record if absent (slot 0 only; its epoch above any earlier life of the
        shard: fencing.bootstrap_epoch), then follow whatever it says. An etcd
        that does not answer (a timeout under load, an outage) is waited for, as register() does:
        a node must not die of it. A create whose answer was lost is safe to retry: the record
        then names this node, which follows it without acting as primary (as a restarted one
        does), and the replicas elect one."""
        node, cfg = self.node, self.node.cfg
        key = cfg.shard_key(node.shard)
        while not node.stopping.is_set():
            try:
                kv = node.etcd.get(key)
                if kv is None and node.slot == 0:
                    epoch = fencing.bootstrap_epoch(retirement.retired_epoch(node.etcd, cfg, node.shard),
                                                    node.store.seq_epoch)
                    rec = ShardRecord(epoch=epoch, primary=node.name, isr=cfg.shard_nodes(node.shard),
                                      start_seq=node.store.seq)
                    if node.etcd.cas(key, 0, rec.to_json(), also_put=[(cfg.leader_key(node.shard), node.name,
                                                                        node.lease)]):
                        node.become_primary(rec, bootstrap=True)
                        return
                    continue
            except EtcdError as e:
                node.events.emit("election-error", {"shard": node.shard, "error": f"bootstrap: {e}"})
                time.sleep(BOOTSTRAP_RETRY_S)
                continue
            if kv is None:
                time.sleep(0.05)
                continue
            rec = ShardRecord.from_json(kv.value)
            with node.cond:
                node.follow(rec.epoch, rec.primary if rec.primary != node.name else "", rec.start_seq)
                node.last_heard = time.monotonic()
            return

    # --------------------------------------------------------------- monitor
    def run(self) -> None:
        """Look every tick until the node stops; then close the probe's channels."""
        node = self.node
        try:
            while True:
                asked, start, cpu = self.tick(), time.monotonic(), time.process_time()
                if node.stopping.wait(asked):
                    return
                now = time.monotonic()
                if detector.paused_locally(now - start, asked):
                    self.paused(now, now - start - asked, time.process_time() - cpu)
                self.step(now)
        finally:
            self.probe.close()

    def step(self, now: float) -> None:
        """One look: a primary checks etcd's silence (and the shard record while its replicas are
        silent), a replica its primary's silence."""
        node, cfg = self.node, self.node.cfg
        if node.role == "primary":
            self.probe.forget()              # a primary probes nobody: no channels to the one it replaced
            if lease.etcd_silent(now, node.lease_seen, cfg.lease_ttl_s):
                # acks stopped at lease_until already; stepping down stops the heartbeats too, so
                # the replicas elect a primary that etcd can hear
                node.lease_lost(f"etcd answered no keepalive for {cfg.lease_ttl_s}s")
            elif self.doubts(now):
                self.check_record()
            return
        self.report(now)
        self.probe.warm(node.primary)        # connected before it is needed (pschaos.psnodes.replication.probe)
        if now < self.held_until or not node.detector.suspects(now, node.last_heard):
            return
        try:
            self.suspect()
        except Exception as e:  # etcd unreachable: try again next tick
            node.events.emit("election-error", {"shard": node.shard, "error": str(e)})
            node.last_heard = lease.after_election_error(node.last_heard, time.monotonic(),
                                                         node.detector.silence_s(), cfg.heartbeat_s)

    def paused(self, now: float, late: float, cpu: float | None = None) -> None:
        """This process stood still `late` seconds longer than it asked: a replica moves the start
        of its primary's silence forward by that much, once per silence
        (pschaos.psnodes.core.detector.after_local_pause); either role says so in a `local-pause`
        event, with the CPU time the whole process used while the elector slept (`cpu`: near 0
        when the host did not run it, near the sleep when its own threads held the interpreter)
        and how long ago it woke (the event is written after the lock). A primary's is evidence
        for no-spurious-failovers (pschaos.harness.checkers.stalls)."""
        node = self.node
        with node.cond:
            role, epoch, credit = node.role, node.epoch, 0.0
            if role != "primary":
                moved = detector.after_local_pause(node.last_heard, now, late, self.credited)
                credit = 0.0 if moved is None else moved - node.last_heard
                if moved is not None:
                    node.last_heard = self.credited = moved
        node.events.emit("local-pause", detector.pause_record(node.shard, epoch, role, late, credit, cpu,
                                                              time.monotonic() - now))

    def tick(self) -> float:
        """How long to sleep: a heartbeat, or (a replica) until its detector would suspect."""
        node, hb = self.node, self.node.cfg.heartbeat_s
        if node.role == "primary":
            return hb
        now = time.monotonic()
        with node.cond:
            return min(hb, max(node.detector.wait(now, node.last_heard, hb), self.held_until - now))

    def report(self, now: float) -> None:
        """Every DETECTOR_REPORT_S, a replica says what its detector has learned (the gaps' mean,
        spread and longest one, the silence it takes to suspect): the evidence behind the
        detector's settings and the twin's fidelity."""
        node = self.node
        if now < self.next_report or not node.primary:
            return
        self.next_report = now + DETECTOR_REPORT_S
        with node.cond:
            stats = {**node.detector.stats(), "max_gap_ms": round(node.detector.take_max_gap() * 1000, 1)}
        node.events.emit("detector", {"shard": node.shard, "epoch": node.epoch, "primary": node.primary, **stats})

    def doubts(self, now: float) -> bool:
        with self.node.cond:
            return self.node.is_primary() and fencing.doubts_epoch(
                self.node.name, self.node.isr, self.node.peer_heard, now, self.node.cfg.suspect_floor_s)

    def check_record(self) -> None:
        """A primary whose replicas went silent: if the shard record names someone else, step
        down now (fenced), so pushes waiting on replication fail over instead of timing out."""
        node, cfg = self.node, self.node.cfg
        try:
            kv = node.etcd.get(cfg.shard_key(node.shard))
        except Exception:  # noqa: BLE001 - etcd unreachable: the lease bound still holds
            return
        rec = ShardRecord.from_json(kv.value) if kv else None
        if rec is not None and not fencing.names_me(rec.epoch, rec.primary, node.epoch, node.name):
            node.fenced(f"shard record moved to epoch {rec.epoch} ({rec.primary}) while replicas were silent")

    def suspect(self) -> None:
        node, cfg = self.node, self.node.cfg
        kv = node.etcd.get(cfg.shard_key(node.shard))
        if kv is None:
            return
        rec = ShardRecord.from_json(kv.value)
        if fencing.follow_record(rec.epoch, node.epoch, rec.primary, node.name):
            with node.cond:
                node.follow(rec.epoch, rec.primary, rec.start_seq)
            return
        # a copy restarted from disk may miss acked updates: it is eligible only once it caught up
        if not promotion.eligible(node.name, rec.isr, node.in_sync):
            self.maybe_restore(rec, kv.mod_revision)
            node.last_heard = time.monotonic()
            return
        self.last_probe = {"ran": False}
        if not node.detector.suspects(time.monotonic(), node.last_heard) or self.held_back(rec):
            return                   # heard meanwhile, or the primary answered our probe
        self.withdraw()
        with node.cond:
            # from here on our answers renew no follower lease of this primary; one that renewed
            # it was sent before last_heard, so that lease ended floor - margin after it (the
            # detector never suspects before the floor: pschaos.psnodes.core.detector)
            now = time.monotonic()
            if not node.detector.suspects(now, node.last_heard):
                return               # the primary was heard meanwhile
            node.suspecting = rec.epoch
            stats = {**node.detector.stats(), "silent_ms": round((now - node.last_heard) * 1000, 1),
                     "probe": detector.probe_told(self.last_probe, self.probe_ended, now)}
        node.events.emit("suspect", {"shard": node.shard, "epoch": rec.epoch, "primary": rec.primary, **stats})
        try:
            self.stand(rec, kv.mod_revision)
        finally:
            with node.cond:
                node.suspecting = 0

    def held_back(self, rec: ShardRecord) -> bool:
        """Probe the primary before standing (pschaos.psnodes.replication.probe): True when it answers as primary of
        `rec`'s epoch in time (detector.may_probe says when a probe runs: the first of a silence,
        and once answered, every look until probe_hold_s); the elector then looks again no
        sooner than a heartbeat later (`held_until`)."""
        node, cfg = self.node, self.node.cfg
        heard = node.last_heard
        silent = time.monotonic() - heard
        if not detector.may_probe(cfg.detector, cfg.probe_s, silent, cfg.suspect_s, self.probed == heard,
                                  self.answered == heard, cfg.probe_hold_s):
            self.last_probe = {"ran": False}
            return False
        self.probed = heard
        wait, asked = detector.probe_wait(cfg.probe_s, silent, cfg.suspect_s), time.monotonic()
        answered = self.probe.clears(rec.primary, rec.epoch, wait)
        self.probe_ended = time.monotonic()
        took = self.probe_ended - asked
        if detector.late_round(answered, wait, took, heard, self.late_excused, silent, cfg.probe_hold_s):
            self.late_excused, self.probed = heard, None      # no miss: the next look probes again
            self.held_until = time.monotonic() + cfg.heartbeat_s
            node.events.emit("probe-held", {"shard": node.shard, "epoch": rec.epoch, "primary": rec.primary,
                                            "silent_ms": round(silent * 1000, 1), "late_ms": round((took - wait) * 1000, 1)})
            return True
        self.missed, held, misses = detector.probe_round(self.missed, self.answered, heard, answered)
        self.last_probe = detector.probe_record(answered, wait, took, misses)
        if not held:
            return False
        if answered:
            self.answered = heard
        self.held_until = time.monotonic() + cfg.heartbeat_s
        node.events.emit("probe-held", {"shard": node.shard, "epoch": rec.epoch, "primary": rec.primary,
                                        "silent_ms": round(silent * 1000, 1), **({"missed": misses} if misses else {})})
        return True

    def stand(self, rec: ShardRecord, mod_revision: int) -> None:
        """Post our candidacy for the epoch after `rec`'s, wait the window (no longer than it takes
        every ISR copy that may stand to post), and take it by a compare-and-swap if we are the
        most up-to-date candidate."""
        node, cfg = self.node, self.node.cfg
        me = {"seq": node.store.seq, "seq_epoch": node.store.seq_epoch}
        prefix = cfg.candidate_prefix(node.shard, rec.epoch)
        node.etcd.put(prefix + node.name, json.dumps(me), lease=node.lease)
        node.events.emit("candidate", promotion.candidate_event(node.shard, rec.epoch, node.name, Position.of(me),
                                                                rec.isr, rec.primary))
        end = time.monotonic() + cfg.candidate_window_s
        while True:
            posted = {c.key[len(prefix):]: Position.of(json.loads(c.value)) for c in node.etcd.get_prefix(prefix)}
            left = end - time.monotonic()
            if left <= 0 or promotion.all_posted(node.name, posted, rec.isr, rec.primary):
                break
            time.sleep(min(left, CANDIDATE_POLL_S))
        won = promotion.elect(node.name, Position.of(me), posted, rec.isr, rec.primary)
        if won.winner != node.name:
            node.last_heard = time.monotonic()   # give the best candidate a suspect period to win
            return
        new = ShardRecord(epoch=rec.epoch + 1, primary=node.name, isr=won.isr, start_seq=node.store.seq)
        if node.etcd.cas(cfg.shard_key(node.shard), mod_revision, new.to_json(),
                         also_put=[(cfg.leader_key(node.shard), node.name, node.lease)]):
            node.events.emit("elected", promotion.elected_event(node.shard, new.epoch, node.name, Position.of(me),
                                                                posted, rec.isr, rec.primary))
            node.become_primary(new)
        else:
            node.last_heard = time.monotonic()

    def maybe_restore(self, rec: ShardRecord, mod_revision: int) -> None:
        """No eligible candidate: once no ISR copy has been alive for a lease TTL, the live copy
        with the newest state restores, by a compare-and-swap that also fails if an ISR copy came
        back meanwhile (its node key changed). Called every suspect period by the elector."""
        node, cfg = self.node, self.node.cfg
        keys = {kv.key.rsplit("/nodes/", 1)[1]: kv for kv in node.etcd.get_prefix(cfg.prefix + "nodes/")}
        announced = {n: json.loads(keys[n].value) for n in rec.isr if n in keys and n != node.name}
        if promotion.isr_copy_alive(node.name, rec.isr, announced):
            self.withdraw()
            return
        prefix = cfg.restore_prefix(node.shard, rec.epoch)
        me = {"seq": node.store.seq, "seq_epoch": node.store.seq_epoch}
        if self.posted != (prefix + node.name, me):
            node.etcd.put(prefix + node.name, json.dumps(me), lease=node.lease)
            self.posted = (prefix + node.name, me)
        now = time.monotonic()
        phase = promotion.orphan_phase(self.orphan_since, now, cfg.lease_ttl_s, cfg.suspect_s)
        if phase is promotion.Orphan.START:
            self.orphan_since = now
            return
        if phase is promotion.Orphan.WAIT:
            return
        live = [n for n in keys if n.startswith(f"shard-{node.shard}/")]
        posted = {c.key[len(prefix):]: Position.of(json.loads(c.value)) for c in node.etcd.get_prefix(prefix)}
        best = promotion.restorer(node.name, Position.of(me), posted, live, now - self.orphan_since,
                                  cfg.lease_ttl_s, cfg.suspect_s)
        if best is None:
            return    # a live copy has not said what it holds yet: it may hold more than we do
        if best != node.name:
            return    # the newest copy restores; if it dies, its candidate key goes with its lease
        plan = node.plan_restore()
        new = ShardRecord(epoch=rec.epoch + 1, primary=node.name, isr=[node.name], start_seq=plan.seq)
        loss = {"shard": node.shard, "epoch": new.epoch, "restored_seq": plan.seq,
                "restored_seq_epoch": plan.seq_epoch, "source": plan.source,
                **({"loaded": plan.loaded} if plan.loaded else {}),
                "previous_epoch": rec.epoch, "previous_primary": rec.primary, "time": time.time()}
        # the routing record as the swap finds it (compared too): the restored state may predate a
        # fence or a switch, and is made to agree with it before it serves (adopt_restore)
        route, route_rev = routing.read(node.etcd, cfg)
        unchanged = [(cfg.node_key(n), keys[n].mod_revision if n in keys else 0) for n in rec.isr if n != node.name]
        won = node.etcd.cas(cfg.shard_key(node.shard), mod_revision, new.to_json(),
                            also_put=[(cfg.leader_key(node.shard), node.name, node.lease),
                                      (cfg.loss_key(node.shard, new.epoch), json.dumps(loss), 0)],
                            also_compare=[*unchanged, (routing.key(cfg), route_rev)])
        self.orphan_since = None
        if won:
            node.adopt_restore(plan, route, new.epoch)
            node.events.emit("restore", loss)
            node.become_primary(new)
            self.withdraw()

    def withdraw(self) -> None:
        """Forget the orphan wait and take back our restore candidate, if we posted one."""
        self.orphan_since = None
        if self.posted is not None:
            key, self.posted = self.posted[0], None
            try:
                self.node.etcd.delete(key)
            except Exception:  # noqa: BLE001 - it goes with our lease anyway
                pass
