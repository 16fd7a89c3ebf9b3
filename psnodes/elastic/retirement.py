"""A shard group that a scale-in retired: its records in etcd go, its last epoch stays.

After the switch a retired shard owns nothing, and once its group stopped nothing reads its
shard record again, unless a later scale-out adds the shard back: then a record left over would
name a primary of a dead epoch, the re-add's wait for "a primary in etcd" would pass before the
new group elected anyone, and its copies (named by that epoch, none in sync) would wait out an
orphan period and restore the shard from the old life's checkpoint. So the record and the leader
key are removed, in one transaction that also keeps the record's epoch under `retired/<shard>`
(the new group's first record starts above it: pschaos.psnodes.core.fencing.bootstrap_epoch). The re-add
path removes a record it still finds the same way before it starts the group.

The harness removes the record BEFORE it stops the group's copies, and again after: with no
record, a replica that suspects its stopping primary never stands (Elector.suspect returns when
the record is missing) and no compare-and-swap on the record can win, so no copy of a retiring
group is promoted, whichever stops first (harness/backends/observe.retire_groups).
"""
from __future__ import annotations

from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.etcd import Etcd, EtcdError

ATTEMPTS = 20        # the record may change under us (a stopping primary shrinks its ISR): read again


def forget(etcd: Etcd, cfg: ClusterConfig, shard: int) -> int | None:
    """Remove shard `shard`'s record and leader key, keeping its epoch as the retired epoch; the
    epoch kept (None: there was no record). Raises EtcdError when etcd does not answer (or the
    record keeps changing: its group still runs)."""
    key = cfg.shard_key(shard)
    for _ in range(ATTEMPTS):
        kv = etcd.get(key)
        if kv is None:
            return None
        tomb = etcd.get(cfg.retired_key(shard))
        epoch = max(ShardRecord.from_json(kv.value).epoch, int(tomb.value) if tomb else 0)
        if etcd.cas(cfg.retired_key(shard), tomb.mod_revision if tomb else 0, str(epoch),
                    also_compare=[(key, kv.mod_revision)], also_delete=[key, cfg.leader_key(shard)]):
            return epoch
    raise EtcdError(f"shard {shard}: its record kept changing over {ATTEMPTS} attempts to remove it; "
                       "is its group still running?")


def retired_epoch(etcd: Etcd, cfg: ClusterConfig, shard: int) -> int:
    """The last epoch of an earlier life of shard `shard` (0: none)."""
    kv = etcd.get(cfg.retired_key(shard))
    return int(kv.value) if kv else 0
