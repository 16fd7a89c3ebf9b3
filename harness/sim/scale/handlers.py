"""What each event of the scale level does (one function per event kind, named after it).

A shard stops acking when its primary is lost (until a promotion or a restore), and in sync mode
while an ISR member that died has not been dropped yet — the primary waits `suspect_s` for it,
and keeps waiting if dropping it would leave fewer than `min_isr` copies. The decisions are the
core's (shards.py); the times are the calibration's (params.timings).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from psnodes.core.promotion import Position

from .params import retry_at
from psnodes.config import ClusterConfig as Config

if TYPE_CHECKING:
    from .engine import ScaleRun
    from .shards import Shard

H = 3600.0
LOG_ENTRIES = Config(cluster_id="scale", etcd="").log_entries


def _refresh(run: "ScaleRun", sh: "Shard") -> None:
    """Ack again once a primary serves, no dead member holds the acks and the ISR is big enough."""
    ok = sh.primary is not None and sh.serving and not sh.pending_drop
    if ok and sh.mode == "sync":
        ok = len(sh.isr) >= sh.min_isr and all(sh.copies[sh.slot(n)].up and sh.copies[sh.slot(n)].in_sync
                                               for n in sh.isr)
    (run.resume_acks if ok else run.stop_acks)(sh.index)


def _repair_draw(run: "ScaleRun", server: bool) -> float:
    f = run.spec.failures
    return float((f.server_repair_s if server else f.worker_repair_s).draw(run.rng))


def _next_failure(run: "ScaleRun", server: bool) -> float | None:
    f = run.spec.failures
    d = f.server_mtbf_h if server else f.worker_mtbf_h
    return None if d is None else float(d.draw(run.rng, None, H))


# servers ---------------------------------------------------------------------------------------
def fail_server(run: "ScaleRun", s: int, r: int, repair_after: float | None, spurious: bool = False) -> None:
    sh = run.shards[s]
    c = sh.copies[r]
    if not c.up:
        return
    run.sync_copies(sh)
    run.tally.server_failures += 1
    c.up, c.incarnation = False, c.incarnation + 1
    # what it holds when it comes back is its local checkpoint (the process's memory is gone)
    ck = _checkpoint(run, s)
    c.seq, c.seq_epoch = (min(c.seq, ck.seq), ck.seq_epoch) if ck else (0, 0)
    if repair_after is not None:
        run.at(run.now + repair_after, "server-repair", s, r)
    if sh.primary == r and sh.serving:
        _primary_lost(run, sh, c.name, spurious=False)
        c.in_sync = False
        return
    if c.in_sync and c.name in sh.isr and sh.primary is not None:
        sh.pending_drop.add(c.name)
        run.at(run.now + run.spec.suspect_s, "isr-drop", s, c.name, sh.token)
    c.in_sync = False
    _refresh(run, sh)


def server_fail(run: "ScaleRun", s: int, r: int) -> None:
    fail_server(run, s, r, _repair_draw(run, True))


def server_repair(run: "ScaleRun", s: int, r: int) -> None:
    sh = run.shards[s]
    c = sh.copies[r]
    if c.up:
        return
    c.up, c.in_sync, c.incarnation = True, False, c.incarnation + 1
    nxt = _next_failure(run, True)
    if nxt is not None:
        run.at(run.now + nxt, "server-fail", s, r)
    if sh.primary is None:                  # an orphan waits for a live copy to restore
        if sh.orphan_since is not None and sh.orphan_ready:
            run.at(run.now + run.t.restart_s, "orphan", s, sh.token)
        return
    _start_catchup(run, sh, r, run.t.restart_s)


def isr_drop(run: "ScaleRun", s: int, name: str, token: int) -> None:
    sh = run.shards[s]
    if token != sh.token or name not in sh.pending_drop:
        return
    sh.pending_drop.discard(name)
    sh.drop(name)            # refused: it stays a member, and acks wait until it is back in sync
    _refresh(run, sh)


def _primary_lost(run: "ScaleRun", sh: "Shard", failed: str, spurious: bool) -> None:
    run.stop_acks(sh.index)
    sh.serving, sh.token = False, sh.token + 1
    sh.pending_drop.clear()
    detect = 0.0 if spurious else run.spec.suspect_s + float(run.rng.uniform(0, run.spec.heartbeat_s))
    run.at(run.now + detect + run.t.elect_s, "elect", sh.index, failed, run.now, sh.token, spurious)


def elect(run: "ScaleRun", s: int, failed: str, t0: float, token: int, spurious: bool) -> None:
    sh = run.shards[s]
    if token != sh.token:
        return
    winner = sh.elect(failed)
    if winner is None:           # no in-sync copy is left: the N-copy group's absorbing state
        run.tally.orphaned.add(s)
        sh.primary, sh.orphan_since, sh.orphan_ready = None, run.now, False
        wait = run.spec.lease_ttl_s + run.spec.suspect_s     # psnodes.core.promotion.orphan_phase
        run.at(run.now + wait, "orphan", s, sh.token)
        return
    if sh.mode == "async":       # acked entries the new primary never got: the replication lag
        lag = run.last_rate * (run.t.msg_s + run.t.fixed_s)     # entries in flight to the replicas
        lost = min(run.spec.max_lag, int(run.rng.poisson(lag)))
        run.offset[s] += lost
        run.tally.lost_acked_updates += lost
    sh.promote(winner, run.head(s))
    run.tally.failovers += 1
    run.tally.spurious_failovers += int(spurious)
    # the workers' retries find it (a spurious failover's clients learn of it from their first refusal)
    back = retry_at(run.now - t0, run.t.fixed_s * 2 + run.cal.etcd_read_s) + run.t.rediscover_s
    (run.tally.spurious_ms if spurious else run.tally.failover_ms).append(back * 1000)
    run.tally.incidents.append([round(t0, 3), round(back * 1000, 1),
                                f"{'spurious ' if spurious else ''}failover shard {s}"])
    run.at(t0 + back, "serve", s, sh.token)
    old = sh.copies[sh.slot(failed)]
    if old.up:                   # a falsely suspected primary steps down and catches up
        old.in_sync = False
        _start_catchup(run, sh, sh.slot(failed), 0.0)
    for c in sh.copies:
        if c.up and not c.in_sync and c.name != failed:
            _start_catchup(run, sh, sh.slot(c.name), 0.0)


def serve(run: "ScaleRun", s: int, token: int) -> None:
    sh = run.shards[s]
    if token == sh.token:
        _refresh(run, sh)


def orphan(run: "ScaleRun", s: int, token: int) -> None:
    sh = run.shards[s]
    if token != sh.token or sh.primary is not None:
        return
    sh.orphan_ready = True
    sh.checkpoint = _checkpoint(run, s)
    before = run.head(s)
    got = sh.restore(before)
    if got is None:
        return                   # no live copy: the first one repaired restores (server_repair)
    _, seq = got
    lost = max(0, before - seq)
    run.offset[s] += lost
    run.rolled_back += lost / run.spec.shards
    run.tally.lost_acked_updates += lost
    run.tally.restores += 1
    run.tally.incidents.append([round(run.now, 3), 0.0, f"restore shard {s} (lost {lost})"])
    if lost:
        run.tally.data_loss_events += 1
        run.tally.shards_lost.add(s)
    run.at(run.now + run.t.rediscover_s, "serve", s, sh.token)
    for c in sh.copies:
        if c.up and not c.in_sync:
            _start_catchup(run, sh, sh.slot(c.name), 0.0)


def _checkpoint(run: "ScaleRun", s: int) -> Position | None:
    """The shard's newest published checkpoint: taken every checkpoint_interval_s from a phase
    of its own while the shard acks, holding the head at that moment (from the run's progress
    series). A copy's local checkpoint is taken on the same beat."""
    ci = run.spec.checkpoint_interval_s
    phase = (s * 0.6180339887 % 1.0) * ci
    upto = run.down_since.get(s, run.now)     # only a primary that acks publishes one
    t_ck = math.floor((upto - phase) / ci) * ci + phase
    if t_ck <= 0:
        return None
    seq = int(run.steps_at(t_ck) - run.offset[s])
    return Position(run.shards[s].epoch, max(0, seq)) if seq > 0 else None


def _start_catchup(run: "ScaleRun", sh: "Shard", r: int, delay: float) -> None:
    c = sh.copies[r]
    head = run.head(sh.index)
    kind = sh.catchup_kind(c, head, LOG_ENTRIES)
    entries = max(0, head - c.seq)
    nbytes = entries * run.t.shard_bytes if kind.value == "log" else run.t.shard_bytes
    took = delay + run.t.fixed_s + nbytes * run.t.per_byte_s + run.cal.apply_s_per_mb * nbytes / 1e6
    run.at(run.now + took, "caught-up", sh.index, r, c.incarnation, sh.token, kind.value, nbytes)


def caught_up(run: "ScaleRun", s: int, r: int, inc: int, token: int, kind: str, nbytes: float) -> None:
    sh = run.shards[s]
    c = sh.copies[r]
    if c.incarnation != inc or not c.up or c.in_sync or sh.primary is None:
        return
    if token != sh.token:
        _start_catchup(run, sh, r, 0.0)
        return
    c.seq, c.seq_epoch, c.in_sync = run.head(s), sh.epoch, True
    sh.rejoin(c.name)
    run.tally.catchups[kind] = run.tally.catchups.get(kind, 0) + 1
    run.tally.catchup_bytes += nbytes
    _refresh(run, sh)


def suspect(run: "ScaleRun", s: int) -> None:
    """A replica missed enough heartbeats to suspect a primary that is alive."""
    sh = run.shards[s]
    from .params import false_suspicion_rate
    rate = false_suspicion_rate(run.spec) * max(run.spec.copies - 1, 0)
    run.at(run.now + float(run.rng.exponential(1 / rate)), "suspect", s)
    if sh.primary is None or not sh.serving or not sh.copies[sh.primary].up:
        return
    run.sync_copies(sh)
    _primary_lost(run, sh, sh.copies[sh.primary].name, spurious=True)


# workers ---------------------------------------------------------------------------------------
def worker_fail(run: "ScaleRun", j: int, repair_after: float | None = -1.0) -> None:
    if not run.worker_up[j]:
        return
    run.worker_up[j] = False
    run.tally.worker_failures += 1
    after = _repair_draw(run, False) if repair_after == -1.0 else repair_after
    if after is not None:
        run.at(run.now + after, "worker-repair", j)


def worker_repair(run: "ScaleRun", j: int) -> None:
    if run.worker_up[j]:
        return
    run.worker_up[j] = True
    nxt = _next_failure(run, False)
    if nxt is not None:
        run.at(run.now + nxt, "worker-fail", j)


# an explicit schedule --------------------------------------------------------------------------
def scheduled(run: "ScaleRun", f: dict) -> None:
    """{at_s, kind: kill|restart, target: primary(shard=i)|replica(shard=i)|shard-i/r|worker-j,
    restart_after_s (kill only; default: never)}."""
    target, kind, after = str(f["target"]), f["kind"], f.get("restart_after_s")
    if target.startswith("worker-"):
        j = int(target.split("-")[1])
        (worker_fail(run, j, after) if kind == "kill" else worker_repair(run, j))
        return
    if target.startswith(("primary(", "replica(")):
        s = int(target.split("=")[1].rstrip(")"))
        sh = run.shards[s]
        if target.startswith("primary("):
            if sh.primary is None:
                return
            r = sh.primary
        else:
            r = next((i for i, c in enumerate(sh.copies) if c.up and i != sh.primary), None)
            if r is None:
                return
    else:
        s, r = (int(x) for x in target.removeprefix("shard-").split("/"))
    (fail_server(run, s, r, after) if kind == "kill" else server_repair(run, s, r))
