"""What each event of the scale level does (one function per event kind, named after it).

A shard stops acking when its primary is lost (until a promotion or a restore, and the clients'
retries reach the new primary), and in sync mode while an ISR member that died has not been
dropped yet: the primary waits `suspect_s` for it, and keeps waiting while dropping it would
leave fewer than `min_isr` copies (retried whenever a copy rejoins). The decisions are the
core's (shards.py); the times are the calibration's (params.timings). Events carry the
generation they were scheduled for (a copy's `life` or `incarnation`, a shard's `token`) and are
dropped when it moved on.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.core.promotion import Position

from pschaos.harness.backends.sim.scale.params import retry_at

if TYPE_CHECKING:
    from pschaos.harness.backends.sim.scale.state import RunState
    from pschaos.harness.backends.sim.scale.shards import Shard

H = 3600.0
LOG_ENTRIES = ClusterConfig(cluster_id="scale", etcd="").log_entries


def refresh(run: "RunState", sh: "Shard") -> None:
    """Ack again once the core's ack rule holds; a failover in progress ends then, when the
    clients' retry schedule (pschaos.psnodes.client.shard_calls.ShardCalls.call) reaches the new primary."""
    s = sh.index
    run.sync_copies(sh)          # in-sync members hold every acked entry (the rule waited for them)
    ok = run.lease_ok and sh.acks(run.head(s))
    if not ok:
        run.stop_acks(s)
        return
    if sh.fail_t0 is None:
        run.resume_acks(s)
        return
    t0 = sh.fail_t0
    # a lost host's calls in flight fail once its process is torn down (kill_teardown_s), and the
    # retry schedule starts there, each retry costing retry_s (params.timings)
    teardown = 0.0 if sh.fail_spurious else run.t.teardown_s
    back = teardown + retry_at(max(0.0, run.now - t0 - teardown), run.t.retry_s) + run.t.rediscover_s
    (run.tally.spurious_ms if sh.fail_spurious else run.tally.failover_ms).append(back * 1000)
    run.tally.incidents.append([round(t0, 3), round(back * 1000, 1),
                                f"{'spurious ' if sh.fail_spurious else ''}failover shard {s}"])
    sh.fail_t0 = None
    run.at(t0 + back, "resume", s, sh.token)


def resume(run: "RunState", s: int, token: int) -> None:
    sh = run.shards[s]
    run.sync_copies(sh)
    if token == sh.token and sh.fail_t0 is None and run.lease_ok and sh.acks(run.head(s)):
        run.resume_acks(s)


def _retry_refused(run: "RunState", sh: "Shard") -> None:
    """psnodes retries a refused ISR removal (isr.should_drop's not_before): once enough copies
    are back in sync, the dead member the primary waited for goes."""
    for name in sorted(sh.refused):
        if not sh.copy(name).up and sh.drop(name):
            sh.refused.discard(name)


# servers ---------------------------------------------------------------------------------------
def fail_server(run: "RunState", s: int, r: int, repair_after: float | None) -> None:
    sh = run.shards[s]
    c = sh.copies[r]
    if not c.up:
        return
    run.sync_copies(sh)
    run.tally.server_failures += 1
    c.up, c.incarnation, c.life = False, c.incarnation + 1, c.life + 1
    # what it holds when it comes back is its local checkpoint (the process's memory is gone)
    ck = run.checkpoint_of(s)
    c.seq, c.seq_epoch = (min(c.seq, ck.seq), ck.seq_epoch) if ck else (0, 0)
    if repair_after is not None:
        run.at(run.now + repair_after, "server-repair", s, r, c.life)
    if sh.primary == r and sh.serving:
        c.in_sync = False
        primary_lost(run, sh, c.name, spurious=False)
        return
    if c.in_sync and c.name in sh.isr and sh.primary is not None and sh.serving:
        sh.pending_drop.add(c.name)
        run.at(run.now + run.spec.suspect_s, "isr-drop", s, c.name, sh.token, c.incarnation)
    c.in_sync = False
    refresh(run, sh)


def server_fail(run: "RunState", s: int, r: int, life: int) -> None:
    if run.shards[s].copies[r].life == life:
        fail_server(run, s, r, run.draw_repair(server=True))


def repair_server(run: "RunState", s: int, r: int) -> None:
    sh = run.shards[s]
    c = sh.copies[r]
    if c.up:
        return
    c.up, c.in_sync, c.incarnation, c.life = True, False, c.incarnation + 1, c.life + 1
    nxt = run.draw_failure(server=True)
    if nxt is not None:
        run.at(run.now + nxt, "server-fail", s, r, c.life)
    if sh.primary is None:                  # an orphan waits for a live copy to restore
        if sh.orphan_ready:
            run.at(run.now + run.t.restart_s, "orphan", s, sh.token)
        return
    if sh.serving and sh.copies[sh.primary].up:
        start_catchup(run, sh, r, run.t.restart_s)


def server_repair(run: "RunState", s: int, r: int, life: int) -> None:
    if run.shards[s].copies[r].life == life:
        repair_server(run, s, r)


def isr_drop(run: "RunState", s: int, name: str, token: int, incarnation: int) -> None:
    sh = run.shards[s]
    c = sh.copy(name)
    if token != sh.token or name not in sh.pending_drop or c.incarnation != incarnation or c.up:
        if token == sh.token and c.up:       # back before its drop: the primary waits for it no more
            sh.pending_drop.discard(name)
        return
    sh.pending_drop.discard(name)
    if not sh.drop(name):
        sh.refused.add(name)     # it stays a member: acks wait until it is back or the drop is allowed
    refresh(run, sh)


def primary_lost(run: "RunState", sh: "Shard", failed: str, spurious: bool) -> None:
    """The replicas suspect once the primary's calls were silent for their detector's silence
    (`detect_s`: pschaos.psnodes.core.detector over the calibrated stream) since the last call they got
    (up to a gap before the loss); their electors sleep until that moment. The phi detector's
    replica then probes the primary, refused by a killed one (`probe_s`), and stands; the
    candidate window closes once every ISR copy that may stand posted, or runs out
    (`candidate_window_s`) when a member of the ISR is down and cannot post. A spurious suspicion
    has happened already."""
    run.stop_acks(sh.index)
    sh.serving, sh.token = False, sh.token + 1
    sh.pending_drop.clear()
    if sh.fail_t0 is None:
        sh.fail_t0, sh.fail_spurious = run.now, spurious
    t = run.t
    detect = 0.0 if spurious else max(0.0, t.detect_s - run.misc.uniform(0, t.gap_s)) + t.probe_s
    silent_member = any(not c.up for c in sh.copies if c.name != failed and c.name in sh.isr)
    window = run.spec.candidate_window_s if silent_member else 0.0
    run.at(run.now + detect + t.elect_s + window, "elect", sh.index, failed, sh.token, spurious)


def elect(run: "RunState", s: int, failed: str, token: int, spurious: bool) -> None:
    sh = run.shards[s]
    if token != sh.token:
        return
    if not run.etcd_up:          # the compare-and-swap waits for etcd
        run.deferred.append(("elect", (s, failed, token, spurious)))
        return
    winner = sh.elect(failed)
    if winner is None:           # no in-sync copy is left: the N-copy group's absorbing state
        run.tally.orphaned.add(s)
        sh.primary, sh.orphan_since, sh.orphan_ready = None, run.now, False
        wait = run.spec.lease_ttl_s + run.spec.suspect_s     # pschaos.psnodes.core.promotion.orphan_phase
        run.at(run.now + wait, "orphan", s, sh.token)
        return
    old = sh.copy(failed)
    if sh.mode == "async":       # acked entries the replicas never got: the replication lag
        lost = min(run.spec.max_lag, int(run.misc.poisson(run.async_lag())), run.head(s))
        if lost:
            if old.up:           # a deposed live primary keeps its own tail: a diverged history
                old.seq, old.seq_epoch = run.head(s), sh.epoch
            for c in sh.copies:
                if c.up and c.in_sync and c.name != failed:
                    c.seq = max(0, c.seq - lost)
            run.lose(s, lost)
    sh.promote(winner)
    run.tally.failovers += 1
    run.tally.spurious_failovers += int(spurious)
    if old.up:                   # a falsely suspected primary steps down and catches up
        old.in_sync = False
    for c in sh.copies:
        if c.up and not c.in_sync:
            start_catchup(run, sh, sh.slot(c.name), 0.0)
    refresh(run, sh)


def orphan(run: "RunState", s: int, token: int) -> None:
    sh = run.shards[s]
    if token != sh.token or sh.primary is not None:
        return
    if not run.etcd_up:
        run.deferred.append(("orphan", (s, token)))
        return
    sh.orphan_ready = True
    sh.checkpoint = run.checkpoint_of(s)
    before = run.head(s)
    got = sh.restore()
    if got is None:
        return                   # no live copy: the first one repaired restores (repair_server)
    _, seq = got
    lost = max(0, before - seq)
    run.lose(s, lost)
    run.tally.restores += 1
    run.tally.incidents.append([round(run.now, 3), 0.0, f"restore shard {s} (lost {lost})"])
    if lost:
        run.tally.data_loss_events += 1
        run.tally.shards_lost.add(s)
    for c in sh.copies:
        if c.up and not c.in_sync:
            start_catchup(run, sh, sh.slot(c.name), 0.0)
    refresh(run, sh)


def start_catchup(run: "RunState", sh: "Shard", r: int, delay: float) -> None:
    c = sh.copies[r]
    head = run.head(sh.index)
    kind = sh.catchup_kind(c, head, LOG_ENTRIES)
    entries = max(0, head - c.seq)
    if kind.value == "heartbeat":
        nbytes = 0.0
    elif kind.value == "log":
        nbytes = entries * run.t.shard_bytes
    else:                        # a delta of a dense shard (every key changed) or a snapshot: the shard
        nbytes = run.t.shard_bytes
    took = delay + run.t.fixed_s + nbytes * run.t.per_byte_s + run.cal.apply_s_per_mb * nbytes / 1e6
    run.at(run.now + took, "caught-up", sh.index, r, c.incarnation, sh.token, kind.value, nbytes)


def caught_up(run: "RunState", s: int, r: int, inc: int, token: int, kind: str, nbytes: float) -> None:
    sh = run.shards[s]
    c = sh.copies[r]
    if c.incarnation != inc or not c.up or c.in_sync:
        return
    if token != sh.token or sh.primary is None or not sh.serving or not sh.copies[sh.primary].up:
        return                   # its primary is gone: elect/orphan start its catch-up again
    c.seq, c.seq_epoch, c.in_sync = run.head(s), sh.epoch, True
    sh.pending_drop.discard(c.name)
    sh.refused.discard(c.name)
    sh.rejoin(c.name)
    _retry_refused(run, sh)
    kind = "none" if kind == "heartbeat" else kind
    run.tally.catchups[kind] = run.tally.catchups.get(kind, 0) + 1
    run.tally.catchup_bytes += nbytes
    refresh(run, sh)


def suspect(run: "RunState", s: int) -> None:
    """A replica missed enough heartbeats to suspect a primary that is alive. Drawn at the rate
    of every replica, kept for the live in-sync ones (only they suspect, and then stand)."""
    sh = run.shards[s]
    run.at(run.now + float(run.misc.exponential(1 / run.suspect_rate)), "suspect", s)
    if sh.primary is None or not sh.serving or not sh.copies[sh.primary].up:
        return
    me = sh.copies[sh.primary].name
    live = sum(1 for c in sh.copies if c.up and c.in_sync and c.name in sh.isr and c.name != me)
    if run.misc.random() * (run.spec.copies - 1) >= live:
        return
    run.sync_copies(sh)
    primary_lost(run, sh, me, spurious=True)


# etcd ------------------------------------------------------------------------------------------
def fail_etcd(run: "RunState", repair_after: float | None) -> None:
    if not run.etcd_up:
        return
    run.etcd_up, run.etcd_life = False, run.etcd_life + 1
    run.tally.etcd_failures += 1
    margin = ClusterConfig(cluster_id="scale", etcd="").lease_margin_s
    run.at(run.now + max(0.0, run.spec.lease_ttl_s - margin), "lease-expire", run.etcd_life)
    if repair_after is not None:
        run.at(run.now + repair_after, "etcd-repair", run.etcd_life)


def etcd_fail(run: "RunState", life: int) -> None:
    if run.etcd_life == life:
        fail_etcd(run, float(run.spec.failures.etcd_repair_s.draw(run.misc)))


def lease_expire(run: "RunState", life: int) -> None:
    """etcd has not confirmed a keepalive for a lease: every primary stops acking."""
    if run.etcd_life == life and not run.etcd_up:
        run.lease_ok = False
        for sh in run.shards:
            refresh(run, sh)


def repair_etcd(run: "RunState") -> None:
    if run.etcd_up:
        return
    run.etcd_up, run.lease_ok, run.etcd_life = True, True, run.etcd_life + 1
    d = run.spec.failures.etcd_mtbf_h
    if d is not None:
        run.at(run.now + float(d.draw(run.misc, None, H)), "etcd-fail", run.etcd_life)
    waiting, run.deferred = run.deferred, []
    for kind, args in waiting:   # the elections and restores that waited go on now
        run.at(run.now + run.t.elect_s, kind, *args)
    for sh in run.shards:
        if sh.primary is not None and sh.serving:
            refresh(run, sh)


def etcd_repair(run: "RunState", life: int) -> None:
    if run.etcd_life == life:
        repair_etcd(run)


# workers ---------------------------------------------------------------------------------------
def fail_worker(run: "RunState", j: int, repair_after: float | None) -> None:
    if not run.worker_up[j]:
        return
    run.worker_up[j] = False
    run.worker_life[j] += 1
    run.tally.worker_failures += 1
    if repair_after is not None:
        run.at(run.now + repair_after, "worker-repair", j, int(run.worker_life[j]))


def worker_fail(run: "RunState", j: int, life: int) -> None:
    if run.worker_life[j] == life:
        fail_worker(run, j, run.draw_repair(server=False))


def repair_worker(run: "RunState", j: int) -> None:
    if run.worker_up[j]:
        return
    run.worker_up[j] = True
    run.worker_life[j] += 1
    nxt = run.draw_failure(server=False)
    if nxt is not None:
        run.at(run.now + nxt, "worker-fail", j, int(run.worker_life[j]))


def worker_repair(run: "RunState", j: int, life: int) -> None:
    if run.worker_life[j] == life:
        repair_worker(run, j)


# an explicit schedule --------------------------------------------------------------------------
def scheduled(run: "RunState", f: dict) -> None:
    """{at_s, kind: kill|restart, target: primary(shard=i)|replica(shard=i)|shard-i/r|worker-j|etcd,
    restart_after_s (kill only; default: never)}; validated by params.check_schedule."""
    target, kind, after = str(f["target"]), f["kind"], f.get("restart_after_s")
    if target == "etcd":
        fail_etcd(run, after) if kind == "kill" else repair_etcd(run)
        return
    if target.startswith("worker-"):
        j = int(target.split("-")[1])
        fail_worker(run, j, after) if kind == "kill" else repair_worker(run, j)
        return
    if target.startswith(("primary(", "replica(")):
        sh = run.shards[int(target.split("=")[1].rstrip(")"))]
        if target.startswith("primary("):
            r = sh.primary
        else:
            r = next((i for i, c in enumerate(sh.copies) if c.up and i != sh.primary), None)
        if r is None:
            return
        s = sh.index
    else:
        s, r = (int(x) for x in target.removeprefix("shard-").split("/"))
    fail_server(run, s, r, after) if kind == "kill" else repair_server(run, s, r)
