"""Observation code both backends share: the routing table read from the live copies while the
control plane is down, and the lifecycle of elastic shard groups (started by a scale-out, their final states recorded as a scale-in retires them).
One place, so the process and the simulated backend cannot judge the same evidence two ways."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from pschaos.psnodes.elastic import retirement, routing
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.etcd import EtcdError

from pschaos.harness.errors import HarnessError


def routes_from_copies(nodes: Iterable[str], alive: Callable[[str], bool],
                       status: Callable[[str], Any]) -> dict[int, ShardRecord]:
    """The routing table as the live copies report it: per shard, the primary at the highest epoch."""
    out: dict[int, ShardRecord] = {}
    for n in nodes:
        st = status(n) if alive(n) else None
        if st is not None and st.role == "primary":
            cur = out.get(st.shard)
            if cur is None or st.epoch > cur.epoch:
                out[st.shard] = ShardRecord(st.epoch, n, list(st.isr))
    return out


def start_groups(be: Any, shards: list[int], start: Callable[[list[str]], None], etcd: Any, timeout: float) -> None:
    """Start the copies of new shard groups (`start(names)`, a group at a time; `be.active` gains
    them) and wait on the backend's clock until each has a primary in etcd. A record an earlier
    life of such a shard left in etcd (a retirement whose removal did not land) is removed first,
    else the wait would pass on it before the new group elected anyone (psnodes/elastic/retirement.py)."""
    limit = max(be.cfg.shards, be.cfg.max_shards)
    bad = [s for s in shards if s >= limit]
    if bad:
        raise HarnessError(f"shards {bad} have no addresses (max_shards={limit}); raise cluster.max_shards")

    def cleared() -> bool:
        try:
            owners = routing.read(etcd, be.cfg)[0].shards
            for s in shards:
                if s not in owners:
                    retirement.forget(etcd, be.cfg, s)
            return True
        except EtcdError:
            return False
    if not be.clock.wait_until(cleared, timeout, 0.05):
        raise HarnessError(f"new shard groups {shards}: the records of their earlier lives could not be removed "
                           f"from etcd within {timeout}s (is etcd up?)")
    for s in shards:
        start(be.cfg.shard_nodes(s))
        if s not in be.active:
            be.active.append(s)

    def ready() -> bool:
        try:
            return all(etcd.get(be.cfg.shard_key(s)) is not None for s in shards)
        except EtcdError:
            return False
    if not be.clock.wait_until(ready, timeout, 0.05):
        raise HarnessError(f"new shard groups {shards} elected no primary within {timeout}s")


def stop_order(nodes: list[str], primary: str | None) -> list[str]:
    """A retiring group's copies in the order to stop them: the primary last. Its record is gone
    from etcd by then (`retire_groups`), so no replica can stand; this order is what is left
    when etcd could not remove it: stopped first, the primary left its replicas silent while they
    still followed it, and one of them stood and was promoted in a shard that owns nothing
    (scale-in-shards: 7 such promotions in 10 seeds, each counted a spurious failover)."""
    return [n for n in nodes if n != primary] + [n for n in nodes if n == primary]


def _primary_of(etcd: Any, cfg: Any, shard: int) -> str | None:
    """The primary the shard record names, or None when etcd cannot say (then slot order)."""
    try:
        kv = etcd.get(cfg.shard_key(shard))
    except EtcdError:
        return None
    return ShardRecord.from_json(kv.value).primary if kv is not None else None


def retire_groups(be: Any, shards: list[int], record: Callable[[str, dict], Any], observe: bool,
                  running: Callable[[str], bool], etcd: Any) -> None:
    """Stop the groups of shards that own nothing now (`be.active` loses them); with `observe`,
    record each copy's final state first (`retired-state`): the acks those shards gave are judged
    by it (harness/checkers/migration.py).

    Each shard's record goes from etcd (psnodes/elastic/retirement.py, which keeps its epoch under
    `retired/<shard>`) BEFORE its copies stop: a replica that suspects finds no record and never
    stands (Elector.suspect returns), and no compare-and-swap on the record can win, so no
    promotion happens in a group the harness is stopping, whichever copy stops first (one counted
    as a spurious failover). It is removed again after the stops (a copy restarted meanwhile may
    have written a new one); one that cannot be removed (etcd down) is said (`shard-record-kept`)
    and removed by the next start of that shard's group."""
    for s in shards:
        for n in be.cfg.shard_nodes(s):
            if observe:
                st = be.final_state(n)
                record("retired-state", {"node": n, "shard": s, "alive": st is not None, **(st or {})})
        if s in be.active:
            be.active.remove(s)
        order = stop_order(be.cfg.shard_nodes(s), _primary_of(etcd, be.cfg, s))
        try:
            retirement.forget(etcd, be.cfg, s)
        except EtcdError as e:                # tried again once the group stopped; the stop order
            record("shard-record-kept", {"shard": s, "error": str(e), "when": "before-stop"})   # is the fallback
        for n in order:
            if running(n):
                be.stop(n)
        try:
            retirement.forget(etcd, be.cfg, s)
        except EtcdError as e:
            record("shard-record-kept", {"shard": s, "error": str(e)})
