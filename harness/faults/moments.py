"""Kills timed against protocol moments: mid-catch-up and mid-promotion (mid-checkpoint is in Kill).

A crash at a random instant rarely lands where a replication protocol is fragile: while a copy
is being brought back (it holds part of what it lacks, and it is out of the ISR), or while a
successor takes over (etcd names it, and it has not served yet). Jepsen times kills against such
moments by hand; here a kill names the moment (`during: catch-up`, `during: promotion`) and
brings it about itself, so that a seeded nemesis can draw it at any time and still land it:

- catch-up: kill the target replica until its primary drops it from the ISR, start it again,
  and kill the primary as soon as the copy answers outside the ISR (it is being caught up).
- promotion: kill the target's shard primary, and kill the successor etcd names the moment it is
  named (it has not finished taking over).

The Backend protocol is used (routing, alive, status, kill, restart) and the context's clock,
so the same moments land on processes, containers and the simulator; where a backend has
`status_when_up` (real processes: the first answer of a starting copy, without the reconnect
backoff its death left), the catch-up moment uses it. A timed kill waits up to 3 x wait_s a try
(catch-up makes up to CATCHUP_ATTEMPTS tries). Whether a moment
was caught is recorded in the fault's info; one that was not is evidence (scenario-ran says
unknown), never a silent ordinary kill.
"""
from __future__ import annotations

from typing import Any

from pschaos.harness.checkers.base import shard_of as node_shard
from pschaos.harness.errors import HarnessError

MOMENTS = ("checkpoint", "catch-up", "promotion")
# a shard migration's phases (harness/faults/shards.py): `migration` is its background copy,
# `handoff` the fenced hand-off; apart from MOMENTS, which a nemesis may draw without a migration
MIGRATION_MOMENTS = ("migration", "handoff")
# a copy seen back in the ISR before it was seen outside it is killed and started again: the moment
# is tried this many times before it is recorded as missed
CATCHUP_ATTEMPTS = 3
POLL_S = 0.002             # how often a moment is looked for: its window can be tens of milliseconds
# long, and each look reads etcd (and asks a copy), so a tighter loop only competes with the cluster


def shard_of(name: str) -> int:
    shard = node_shard(name)
    if shard is None:
        raise HarnessError(f"kill {name}: during catch-up or promotion needs a shard copy as target "
                           "(e.g. replica(shard=any)), not a worker or etcd")
    return shard


def kill_mid_catchup(ctx: Any, target: str, wait_s: float, info: dict) -> None:
    """Kill replica `target`, wait until its primary dropped it from the ISR, start it again,
    and kill the primary the moment the copy answers while still outside the ISR: the primary
    dies while catching it up (the copy has part of what it lacks, or all of it and not yet its
    place back), so a successor must finish the job, and the half-caught-up copy must not be
    promoted. Why the primary and not the copy: on loopback the copy's own catch-up is one call,
    over before anything outside can see it, while its return to the ISR waits for etcd.
    Records in `info` as it goes: `victims`, `down` (what must be dead when it returns), the
    primary as `target`, `was_primary` and `primary_killed_after_s` once the primary is killed
    (seconds into the fault: its failover is timed from then, not from the replica's kill), and `caught_catching_up`
    ({copy, seq, primary_seq}), or None when the moment was missed; `attempts`: the tries made. A
    copy back in the ISR before its first answer is killed and started again (CI, on a loaded
    machine, saw the harness look too late once, and the run was unknown), up to CATCHUP_ATTEMPTS."""
    be, shard, start = ctx.backend, shard_of(target), ctx.clock.monotonic()
    rec = be.routing().get(shard)
    if rec is None or rec.primary == target:
        raise HarnessError(f"kill {target} during catch-up: name a replica (e.g. replica(shard=any)); the "
                           "fault kills the primary while it catches that replica up")
    primary, epoch = rec.primary, rec.epoch
    info.update(copy=target, shard=shard, epoch=epoch, was_primary=False, victims=[target], target=target,
                down=[target], caught_catching_up=None, attempts=0)
    for attempt in range(1, CATCHUP_ATTEMPTS + 1):
        info["attempts"] = attempt
        seen = _catch_once(ctx, target, shard, primary, epoch, wait_s, info)
        if seen is None:          # not dropped, never answered, or the shard moved on: no retry helps
            return
        if seen:
            break
        # back in the ISR before its first answer (a loaded machine: the harness looked too late)
    else:
        return
    info.update(victims=[target, primary], target=primary, down=[primary], was_primary=True,
                primary_killed_after_s=round(ctx.clock.monotonic() - start, 6))
    be.kill(primary)
    info["caught_catching_up"] = seen


def _catch_once(ctx: Any, target: str, shard: int, primary: str, epoch: int, wait_s: float,
                info: dict) -> dict | None:
    """One try at the moment: kill `target`, wait for the ISR to drop it, start it again and look
    for it answering outside the ISR. What the copy answered ({copy, seq, primary_seq}) when it was
    seen there; {} when it was back in the ISR first (a try may be made again); None when the moment
    cannot come (not dropped or no answer within `wait_s`, or a new epoch: the primary is gone)."""
    be = ctx.backend
    be.kill(target)
    info["down"] = [target]

    def dropped() -> bool:
        r = be.routing().get(shard)
        return r is not None and target not in r.isr

    if not ctx.clock.wait_until(dropped, wait_s, 0.01):
        return None
    owed = be.status(primary)
    be.restart(target)
    info["down"] = []
    seen: dict = {}
    back_inside: list[bool] = []
    when_up = getattr(be, "status_when_up", None)    # real processes: their first answer, at once
    first = [when_up(target, wait_s)] if when_up is not None else []

    def looked() -> bool:
        st = first.pop() if first else be.status(target)
        r = be.routing().get(shard)
        if r is None or r.epoch != epoch:
            return False
        if target in r.isr:
            back_inside.append(True)     # caught up and back before it was seen outside: missed
            return True
        if st is None:
            return False
        seen.update(copy=target, seq=int(st.seq), primary_seq=int(owed.seq) if owed else None)
        return True

    if not ctx.clock.wait_until(looked, wait_s, POLL_S):
        return None
    return {} if back_inside else seen


def kill_mid_promotion(ctx: Any, target: str, wait_s: float, info: dict) -> None:
    """Kill the primary of `target`'s shard, then the successor etcd names, the moment it is
    named. Records in `info` as it goes (a heal after a failure midway restarts what it killed):
    `deposed`, `victims`, `down`, the successor as `target`, and `caught_promoting` ({epoch,
    after_ms}: how long after its naming it was killed), or None when no successor was named
    within `wait_s`. The failover is timed to the first ack above the successor's epoch
    (`failover_after_epoch`): an ack the successor gave in its moments alive ends nothing."""
    be, shard = ctx.backend, shard_of(target)
    rec = be.routing().get(shard)
    if rec is None:
        raise HarnessError(f"kill {target} during promotion: shard {shard} has no routing record (etcd down?)")
    deposed, epoch = rec.primary, rec.epoch
    # the failover the checkers time starts with the deposed primary's kill, at its epoch
    info.update(deposed=deposed, shard=shard, epoch=epoch, was_primary=True, victims=[deposed], target=deposed,
                down=[deposed], caught_promoting=None)
    be.kill(deposed)
    named: dict = {}

    def successor() -> bool:
        r = be.routing().get(shard)
        if r is None or r.epoch <= epoch or r.primary == deposed:
            return False
        named.update(node=r.primary, epoch=r.epoch, at=ctx.clock.monotonic())
        return True

    if not ctx.clock.wait_until(successor, wait_s, POLL_S):
        return
    info.update(victims=[deposed, named["node"]], target=named["node"], down=[deposed, named["node"]],
                failover_after_epoch=named["epoch"])
    be.kill(named["node"])
    after_ms = round((ctx.clock.monotonic() - named["at"]) * 1000, 2)
    info["caught_promoting"] = {"epoch": named["epoch"], "after_ms": after_ms}


def await_migration(ctx: Any, moment: str, wait_s: float) -> str | None:
    """Wait until the routing record shows a migration in the moment's phase (copy, or fenced for
    `handoff`); the phase seen, or None when none came within `wait_s` (the kill then lands as an
    ordinary one, and scenario-ran says so)."""
    be = ctx.backend
    if not hasattr(be, "migration_phase"):
        raise HarnessError(f"kill during {moment}: the {getattr(be, 'name', '?')} backend runs no shard migration")
    want = "copy" if moment == "migration" else "fenced"
    seen: list[str] = []

    def phase() -> bool:
        p = be.migration_phase()
        if p == want:
            seen.append(p)
        return bool(seen)
    ctx.clock.wait_until(phase, wait_s, POLL_S)
    return seen[0] if seen else None


def moment_target_error(kind: str, params: dict, target: str) -> str | None:
    """Why a kill timed to a protocol moment cannot act on `target`, or None: both moments act
    on a shard's copies, and catch-up kills the primary that catches a replica up, so its
    target names the replica."""
    during = params.get("during") if kind in ("kill", "power-loss") else None
    if during not in ("catch-up", "promotion"):
        return None
    if not target.startswith(("shard-", "primary(", "replica(", "replicas(")):
        return f"a kill during {during} acts on a shard's copies; name one (e.g. replica(shard=any)), not {target!r}"
    if during == "catch-up" and target.startswith("primary("):
        return (f"a {kind} during catch-up names the replica to bring back (replica(shard=N)); it acts on the "
                "copy catching up by itself" if kind == "power-loss" else
                "a kill during catch-up names the replica to bring back (replica(shard=N)); it kills the "
                "primary catching it up by itself")
    return None
