"""Worker membership for BSP/SSP: whom the barrier waits for, generation by generation.

A fixed set `worker-0..N-1` stalls a barrier forever when one of them dies, and drags it back to
clock 0 when one joins late. Here the set lives in one record (generation + members, changed only
by compare-and-swap, psnodes/membership/members.py), and each member is there by an etcd registration under
a lease: a worker that dies stops keeping its lease alive, etcd deletes its registration after
the lease's TTL, and the next reconcile drops it (`expire`); one that stops gracefully removes
itself at once (`leave`). Every change of who counts moves the generation by one.

A member's clock on a shard is `max(start, its pushed clock + 1)`. `start` is set at admission to
the shard's *front* (the highest clock any worker reached there): so a joiner never drags the
barrier back (start >= the floor), never claims a round no worker reached (start <= the front),
and its own first pull (at step `start`) still waits for the slowest member to come within
`staleness` (psnodes/core/gating.py): it cannot skip ahead of the bound. The workers the cluster
config names are members from the start (start 0, lease 0 until they register), as the fixed set
was; one that has not registered within `member_join_grace_s` of a primary's watching (it died
while starting, or was never started) is dropped like an expired one (`overdue`), so it cannot
hold the barrier forever; if it registers later it joins at the front.

A gated pull is served only to a member of the generation the copy holds (`member_of`): a worker
the barrier does not count must not train inside it (it was dropped: it joins again), and a joiner
is counted by every copy that serves it, not only by the ones that adopted it first. A generation
with no member therefore serves no gated pull at all, rather than all of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Mapping

UNBOUNDED = 1 << 62       # the floor of a barrier with no member: no pull waits (store.MAX_CLOCK)


@dataclass(frozen=True)
class Member:
    start: int          # the clock it counts at before its first push
    lease: int          # the etcd lease of its registration; 0: named by the config, not registered yet


@dataclass(frozen=True)
class Record:
    generation: int
    members: Mapping[str, Member] = field(default_factory=dict)

    def starts(self) -> dict[str, int]:
        return {n: m.start for n, m in sorted(self.members.items())}


@dataclass(frozen=True)
class Change:
    """One membership change, as the history records it (`member-<kind>`)."""
    kind: str           # "join", "leave" (graceful), "expire" (registration gone or replaced)
    worker: str
    generation: int     # the generation the change made
    start: int
    lease: int
    reason: str = ""


def bootstrap(workers: int, generation: int = 0) -> Record:
    """The config's workers, none registered yet: the barrier of a fresh cluster (generation 0 is
    the implicit record a node gates by before the first one is written)."""
    return Record(generation, {f"worker-{j}": Member(0, 0) for j in range(workers)})


def reconcile(rec: Record | None, registered: Mapping[str, int], front: int,
              workers: int, overdue: Collection[str] = ()) -> tuple[Record, list[Change]] | None:
    """The record etcd should hold given the live registrations (name -> lease) and this shard's
    `front`, with the changes that lead there; None when it already holds it.

    - a member whose registration is gone, or now under another lease (a restarted process),
      is dropped (`expire`); a config worker not registered yet (lease 0) is kept, unless it is
      `overdue` (the shell saw it unregistered for longer than its join grace): then it expires;
    - a config worker that registers keeps its start (0) and takes the lease: no new generation,
      nobody new counts;
    - any other registration joins at `front` (a restarted one too: it does not drag the barrier
      back to where it died).
    """
    base = rec if rec is not None else bootstrap(workers)
    gen = base.generation + 1
    members: dict[str, Member] = {}
    changes: list[Change] = []
    filled = False
    for name, m in sorted(base.members.items()):
        lease = registered.get(name)
        if m.lease == 0:
            if lease is not None:
                filled = True
            elif name in overdue:
                changes.append(Change("expire", name, gen, m.start, 0, "never registered within member_join_grace_s"))
                continue
            members[name] = Member(m.start, lease or 0)
        elif lease == m.lease:
            members[name] = m
        else:
            why = "registration gone (lease expired or revoked)" if lease is None else \
                f"registered again under lease {lease}"
            changes.append(Change("expire", name, gen, m.start, m.lease, why))
    for name, lease in sorted(registered.items()):
        if name not in members:
            members[name] = Member(front, lease)
            changes.append(Change("join", name, gen, front, lease))
    if not changes and not filled and rec is not None:
        return None
    return Record(gen if changes or rec is None else base.generation, members), changes


def leave(rec: Record, worker: str, lease: int) -> tuple[Record, Change] | None:
    """A worker leaving gracefully takes itself out (None: it is not a member under `lease`)."""
    m = rec.members.get(worker)
    if m is None or m.lease != lease:
        return None
    members = {n: x for n, x in rec.members.items() if n != worker}
    gen = rec.generation + 1
    return Record(gen, members), Change("leave", worker, gen, m.start, lease, "graceful stop")


def admitted(rec: Record | None, worker: str, lease: int) -> Member | None:
    """The worker's membership under this registration, once the record holds it."""
    m = rec.members.get(worker) if rec is not None else None
    return m if m is not None and m.lease == lease else None


def unregistered(rec: Record | None, workers: int) -> list[str]:
    """The config workers the barrier still counts without a registration (lease 0): the ones a
    primary times against `member_join_grace_s`."""
    base = rec if rec is not None else bootstrap(workers)
    return sorted(n for n, m in base.members.items() if m.lease == 0)


def overdue_workers(waiting_since: Mapping[str, float], now: float, grace_s: float) -> set[str]:
    """The unregistered config workers seen waiting for longer than the grace (times on the
    shell's own monotonic clock, from when it first saw each one unregistered)."""
    return {n for n, t in waiting_since.items() if now - t >= grace_s}


def member_of(rec: Record | None, worker: str, elastic: bool) -> bool:
    """Whether a gated pull from `worker` may be served by a copy holding `rec`: only a member's
    (a node without etcd gates by the config's fixed set and serves anyone, as before)."""
    if not elastic:
        return True
    return rec is not None and worker in rec.members


def newer(rec: Record, than: Record | None) -> bool:
    """Whether a node should adopt `rec`: generations only go forward."""
    return than is None or rec.generation > than.generation


def clock_of(clocks: Mapping[str, int], worker: str, start: int) -> int:
    """A member's clock on a shard: its start until it pushed past it."""
    return max(start, clocks.get(worker, 0))


def floor(clocks: Mapping[str, int], rec: Record) -> int:
    """The slowest member's clock (UNBOUNDED with no member)."""
    return min((clock_of(clocks, n, m.start) for n, m in rec.members.items()), default=UNBOUNDED)


def front(clocks: Mapping[str, int]) -> int:
    """The highest clock any worker reached on this shard: where a joiner starts."""
    return max(clocks.values(), default=0)


def barrier_floor(clocks: Mapping[str, int], rec: Record | None, workers: int, elastic: bool) -> int | None:
    """What a gated pull compares against: the members' floor; None while a node that learns
    membership from etcd (`elastic`) has read none yet (it must wait, not guess); without etcd
    (in-process nodes) the config's fixed set, as before membership existed."""
    if rec is not None:
        return floor(clocks, rec)
    if elastic:
        return None
    return floor(clocks, bootstrap(workers))


def pull_ready(min_clock: int, barrier: int | None) -> bool:
    """A pull asking for `min_clock` (< 0: no wait) may be served at this barrier floor."""
    return min_clock < 0 or (barrier is not None and barrier >= min_clock)


def pull_wait(min_clock: int, clocks: Mapping[str, int], rec: Record | None, worker: str, workers: int,
              elastic: bool) -> str | None:
    """Why a pull must wait yet (words for its timeout), or None when it may be served: ungated,
    or from a member of the generation held whose slowest member is within its bound. A pull at
    clock 0 asks nothing of anyone (every clock is >= 0): it needs a generation, not membership,
    as before (a request that leaves min_clock unset, an anonymous reader, is such a pull)."""
    if min_clock < 0:
        return None
    gen = rec.generation if rec is not None else None
    if min_clock > 0 and not member_of(rec, worker, elastic):
        return (f"min_clock={min_clock}: {worker!r} is not a member of membership generation {gen} here "
                "(dropped, or not adopted here yet); it must join again")
    barrier = barrier_floor(clocks, rec, workers, elastic)
    if pull_ready(min_clock, barrier):
        return None
    return (f"min_clock={min_clock}: the slowest worker is at clock {barrier} (membership generation "
            f"{gen}); BSP/SSP wait timed out")


def no_barrier(min_clock: int, barrier: bool) -> str | None:
    """A gated pull on a cluster configured without a barrier: the refusal's words (None: fine)."""
    if min_clock < 0 or barrier:
        return None
    return (f"min_clock={min_clock}: this cluster's config has barrier: false (no worker membership is "
            "kept); start it with barrier: true for BSP/SSP training")


def resume_step(step: int, start: int) -> int:
    """The step a worker goes on from after (re)admission at `start`: never back, and never below
    the clock the shards already count it at."""
    return max(step, start)


def to_dict(rec: Record) -> dict:
    return {"generation": rec.generation,
            "members": {n: {"start": m.start, "lease": m.lease} for n, m in sorted(rec.members.items())}}


def from_dict(d: object) -> Record:
    """A record read back; ValueError naming the field when it is not one."""
    if not isinstance(d, dict) or not isinstance(d.get("generation"), int) or d["generation"] < 0:
        raise ValueError("membership record: generation must be an integer >= 0")
    ms = d.get("members")
    if not isinstance(ms, dict):
        raise ValueError("membership record: members must be an object {worker: {start, lease}}")
    out = {}
    for n, m in ms.items():
        if not (isinstance(m, dict) and isinstance(m.get("start"), int) and isinstance(m.get("lease"), int)
                and m["start"] >= 0 and m["lease"] >= 0):
            raise ValueError(f"membership record: members[{n!r}] must be {{start: int >= 0, lease: int >= 0}}")
        out[str(n)] = Member(m["start"], m["lease"])
    return Record(d["generation"], out)
