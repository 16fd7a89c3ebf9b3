"""Scale-out and scale-in of shards while training, with live key migration.

`scale-out-shards` starts the new shard groups (primary and replicas, addresses given at start:
ClusterSpec.max_shards), waits until each has a primary, and runs psnodes' migration coordinator
(psnodes/elastic/migration.py) in the background: copy, fence, hand-off, switch of the routing record.
`scale-in-shards` moves the keys of the highest-numbered shards to the others and, once the
switch landed, records the retired groups' final states (`retired-state`: no-lost-acks judges
their acks by them) and stops them. Params: `to` (the shard count after) or `count` (shards
added or removed), `hold_s` (the copy phase lasts at least this long, as a large copy would,
so faults can land in it) and `fenced_hold_s` (the same for the fenced hand-off, as a large delta
would: `kill during: handoff` lands there). The fault stays open until the migration ended (switched or aborted;
`finished`), and its info says which, with the bytes moved and the fenced time. The coordinator
runs in a thread of the run's clock (a real thread, or a simulated one on the sim backend, where
the same coordinator runs in virtual time).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from pschaos.psnodes.elastic.migration import ASYNC_REFUSED, longest_s

from pschaos.harness.errors import HarnessError
from pschaos.harness.faults.base import Fault

KINDS = ("scale-out-shards", "scale-in-shards")
SPEC = {"to": (int, 0), "count": (int, 0), "hold_s": (float, 0.0), "fenced_hold_s": (float, 0.0)}


def target_count(kind: str, current: int, params: dict) -> int | str:
    """The shard count a scale fault asks for from `current`, or why it cannot."""
    to, count = params.get("to", 0), params.get("count", 0)
    if bool(to) == bool(count):
        return f"{kind}: give exactly one of params.to (the shard count after) or params.count (shards to " \
               f"{'add' if kind == 'scale-out-shards' else 'remove'})"
    if count < 0 or to < 0:
        return f"{kind}: params.to and params.count must be positive"
    n = to or (current + count if kind == "scale-out-shards" else current - count)
    if kind == "scale-out-shards" and n <= current:
        return f"{kind}: params.to={n} is not above the {current} shards there are then; use scale-in-shards"
    if kind == "scale-in-shards" and not 1 <= n < current:
        return f"{kind}: params.to={n} must be at least 1 and below the {current} shards there are then"
    if n > 64:
        return f"{kind}: at most 64 shards (params.to={n})"
    return n


def shard_counts(start: int, faults) -> list[int] | str:
    """The shard counts a schedule goes through, in order (its largest sizes the cluster's address
    space); or why a step of it cannot happen."""
    out, cur = [start], start
    for i, f in enumerate(sorted(faults, key=lambda f: (f.at.time or 0, f.at.step or 0))):
        if f.kind in KINDS:
            n = target_count(f.kind, cur, {**{k: d for k, (_, d) in SPEC.items()}, **f.params})
            if isinstance(n, str):
                return f"faults: {n}"
            out.append(n)
            cur = n
    return out


def schedule_problem(replication: str, faults, nemesis_kinds=()) -> str | None:
    """Why a schedule's scale-*-shards faults cannot run (None when they can): async replication
    (docs/internals/elastic-shards.md), or two of them at one moment (one migration at a time: a second
    coordinator would race the first for the routing record)."""
    kinds = [f.kind for f in faults if f.kind in KINDS] + [k for k in nemesis_kinds if k in KINDS]
    if kinds and replication == "async":
        return f"cluster.{ASYNC_REFUSED} (faults: {sorted(set(kinds))})"
    moments = [(f.at.time, f.at.step) for f in faults if f.kind in KINDS]
    if len(moments) != len(set(moments)):
        return "faults: two scale-*-shards faults at the same `at` would run two migrations at once; give each " \
               "its own moment (one migration runs at a time; a later one starts after the earlier ended)"
    return None


def target_shards(cur: list[int], n: int) -> list[int]:
    """The shard set of n shards after `cur`: the next free ids added, or the highest removed."""
    if n >= len(cur):
        free = [s for s in range(64) if s not in cur]
        return sorted(list(cur) + free[: n - len(cur)])
    return sorted(cur)[:n]


class _ScaleShards(Fault):
    params_spec = SPEC

    @classmethod
    def params_problem(cls, params: dict) -> str | None:
        if bool(params["to"]) == bool(params["count"]):
            return f"{cls.kind}: give exactly one of params.to or params.count"
        if params["hold_s"] < 0 or params["hold_s"] > 60:
            return f"{cls.kind}: params.hold_s must be between 0 and 60 seconds"
        if params["fenced_hold_s"] < 0 or params["fenced_hold_s"] > 10:
            return f"{cls.kind}: params.fenced_hold_s must be between 0 and 10 seconds (the moving keys are " \
                   "unavailable for writes that long)"
        return None

    def inject(self) -> None:
        be = self.ctx.backend
        if not hasattr(be, "migrate_shards"):
            raise HarnessError(f"fault kind {self.kind!r} is not modelled by the {getattr(be, 'name', '?')} backend; "
                               "shard migration runs on the process and sim backends")
        if be.cfg.mode != "sync":
            raise HarnessError(f"{self.kind}: cluster.{ASYNC_REFUSED}")
        busy = getattr(be, "_migrating", None)
        if busy is not None and not busy.finished():
            raise HarnessError(f"{self.kind}: another migration ({busy.kind}) is still running; one migration runs "
                               "at a time: schedule this one after it ended")
        be._migrating = self
        cur = be.active_shards()
        n = target_count(self.kind, len(cur), self.params)
        if isinstance(n, str):
            raise HarnessError(n)
        dst = target_shards(cur, n)
        added = sorted(set(dst) - set(cur))
        be.start_shard_groups(added)
        self.info.update(shards_before=cur, shards_after=dst, shards_added=added,
                         shards_removed=sorted(set(cur) - set(dst)))
        self.done = threading.Event()        # only polled (finished), never waited on
        nonce = f"{self.ctx.rng.getrandbits(32):08x}"      # the migration id's, from the run's seed
        self.thread = self.ctx.clock.spawn(lambda: self._migrate(dst, nonce), self.kind)

    def _migrate(self, dst: list[int], nonce: str) -> None:
        be = self.ctx.backend
        try:
            out = be.migrate_shards(dst, self.ctx.record, self.params["hold_s"], nonce=nonce,
                                    fenced_hold_s=self.params["fenced_hold_s"])
            self.info.update(migration=out.id, switched=out.switched, aborted=out.aborted or None,
                             routing_epoch=out.routing_epoch, bytes=out.bytes, key_bytes=out.key_bytes,
                             fenced_ms=out.unavailable_ms)
            if out.switched:
                settled_holdings(be, self.ctx.clock, self.ctx.record, out.id, out.routing_epoch, dst)
            if out.switched and out.retired:
                be.retire_shard_groups(out.retired, self.ctx.record)
            if not out.switched and self.info.get("shards_added"):
                be.retire_shard_groups(self.info["shards_added"], self.ctx.record, observe=False)
        except Exception as e:  # noqa: BLE001 - recorded: the fault-stop says the migration failed
            self.info["migration_error"] = f"{e.__class__.__name__}: {e}"
            self._stop_unused_groups(be)
        finally:
            self.done.set()

    def _stop_unused_groups(self, be) -> None:
        """The coordinator failed outright (an announce that never landed, an abort that could not):
        the groups this fault started are stopped unless the routing record names them (a switch
        that landed after all gave them keys); with etcd silent they are kept, and the info says so."""
        added = self.info.get("shards_added") or []
        if not added:
            return
        rec = be.routing_record()
        if rec is None or set(added) & {*rec.shards, *(rec.migration.dst if rec.migration else ())}:
            self.info["groups_kept"] = added
            return
        try:
            be.retire_shard_groups(added, self.ctx.record, observe=False)
        except Exception as e:  # noqa: BLE001 - recorded beside the migration's own error
            self.info["groups_kept"] = added
            self.info["migration_error"] += f"; stopping groups {added}: {e}"

    def finished(self) -> bool:
        return getattr(self, "done", None) is not None and self.done.is_set()

    def heal(self) -> None:
        """The end of the run: wait (bounded) for a migration still going on."""
        t = getattr(self, "thread", None)
        if t is not None:
            bound = longest_s() + SETTLE_S    # the coordinator's own bound (it always ends, switched, aborted or
            # stuck), and the holdings read after a switch
            if not self.ctx.clock.join(t, bound):
                raise HarnessError(f"{self.kind}: the migration did not end within {bound:.0f} s of the heal")
        if self.info.get("migration_error"):
            raise HarnessError(f"{self.kind}: {self.info['migration_error']}")


class ScaleOutShards(_ScaleShards):
    """Add shard groups (the next free shard ids) and move their keys to them."""

    kind = "scale-out-shards"


class ScaleInShards(_ScaleShards):
    """Move the keys of the highest-numbered shards to the others, then stop their groups."""

    kind = "scale-in-shards"


SETTLE_S = 10.0     # how long after a switch the copies of the new shard set are given to adopt it


def settled_holdings(be: Any, clock: Any, record: Callable[[str, dict], Any], migration: str,
                     epoch: int, shards: list[int], wait_s: float = SETTLE_S) -> None:
    """After a migration switched to routing epoch `epoch` over `shards`: each running copy of the
    new shard set, once it applied the switch (its routing epoch reached `epoch`: a light Status
    polled every 0.2 s), records what it holds sorted by owner under `shards` (a `holdings` event,
    one full read each: ownership-exact judges it against the switch in the history). Then
    `holdings-read` says which copies were read, which were down and which still behind after
    `wait_s`: none of those is judged as if it had settled, and a shard none of whose copies was
    read leaves the check unknown."""
    nodes = [n for s in shards for n in be.shard_nodes(s)]
    read: dict[str, dict] = {}
    down: set[str] = set()

    def look() -> bool:
        for n in nodes:
            if n in read:
                continue
            if not be.alive(n):
                down.add(n)
                continue
            down.discard(n)
            st = be.status(n)
            if st is None or int(getattr(st, "routing_epoch", 0)) < epoch:
                continue
            full = be.final_state(n, shards)
            if full is not None and full.get("holdings") is not None:
                read[n] = full
        return all(n in read or n in down for n in nodes)

    clock.wait_until(look, wait_s, 0.2)
    for n, st in read.items():
        record("holdings", {"node": n, "shard": int(n.split("-")[1].split("/")[0]), "migration": migration,
                            "routing_epoch": int(st["routing_epoch"]), **st["holdings"]})
    record("holdings-read", {"migration": migration, "routing_epoch": epoch, "shards": list(shards),
                             "read": sorted(read), "down": sorted(down),
                             "behind": [n for n in nodes if n not in read and n not in down], "wait_s": wait_s})
