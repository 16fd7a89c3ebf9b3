"""A shard retired by a scale-in and added again by a later scale-out (review section 4, debris).

The retired groups' shard records used to stay in etcd, so the re-add's readiness check (a record
exists) passed before the new group had elected anyone, the coordinator called a primary that
was not one, and the copies (not in sync, named by a dead epoch) waited out an orphan period and
restored the shard from its old checkpoint. Now the record goes when the retirement is final (the
group stopped after the switch), a re-add removes any stale one before it starts the group, and
the new record's epoch continues above every epoch the copies' disks hold (a shard's log never
goes back in epochs). On the twin: the harness's code and psnodes' election are the same.
"""
from __future__ import annotations

import numpy as np
import pytest

from pschaos.harness.history.events import read_events
from pschaos.harness.backends.sim.backend import SimBackend
from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.placement import owner
from tests.unit.harness.backends.sim.test_copy_migrate import NAMES, backend, trained  # noqa: F401 - a fixture


@pytest.fixture
def be(backend: SimBackend) -> SimBackend:
    """2 shards x 2 copies, room for 3 (test_copy_migrate's backend)."""
    return backend


def record(be: SimBackend, shard: int) -> ShardRecord | None:
    kv = be.etcd.get(be.cfg.shard_key(shard))
    return ShardRecord.from_json(kv.value) if kv else None


def served_by_a_primary(be: SimBackend, shard: int) -> bool:
    rec = record(be, shard)
    c = be.copies.get(rec.primary) if rec else None
    return c is not None and c.alive and c.role == "primary" and c.epoch == rec.epoch


def scale(be: SimBackend, dst: list[int]) -> None:
    added = sorted(set(dst) - set(be.active_shards()))
    if added:
        be.start_shard_groups(added)
        assert all(served_by_a_primary(be, s) for s in added), \
            f"start_shard_groups returned before groups {added} had a primary (a stale record?)"
    out = be.migrate_shards(dst, lambda f, v: None)
    assert out.switched, out.aborted
    if out.retired:
        be.retire_shard_groups(out.retired, lambda f, v: None)


def restores(be: SimBackend) -> list[dict]:
    return [e for p in sorted((be.run_dir / "events").glob("shard-2-*.jsonl")) for e in read_events(p)
            if e["f"] == "restore"]


def test_a_retired_shard_s_record_goes_and_a_re_added_group_elects_afresh(be):
    c = trained(be)
    c.push({n: np.ones(4, np.float32) for n in NAMES}, {})
    scale(be, [0, 1, 2])
    first = record(be, 2)
    scale(be, [0, 1])
    assert record(be, 2) is None, "the retired shard's record stayed in etcd"
    assert be.etcd.get(be.cfg.leader_key(2)) is None
    c.push({n: np.ones(4, np.float32) for n in NAMES}, {})
    before = {n: be.copies[record(be, owner(n, (0, 1))).primary].store.dense[n].copy()
              for n in NAMES if owner(n, (0, 1, 2)) == 2}
    scale(be, [0, 1, 2])
    again = record(be, 2)
    assert again.epoch > first.epoch, f"the re-added shard's epoch went back: {first.epoch} -> {again.epoch}"
    assert restores(be) == [], "the re-added group restored its shard from the old life's checkpoint"
    prim = be.copies[again.primary].store
    for n, v in before.items():
        np.testing.assert_array_equal(prim.dense[n], v)


def test_a_stale_record_left_behind_does_not_make_the_re_add_vacuous(be):
    c = trained(be)
    c.push({n: np.ones(4, np.float32) for n in NAMES}, {})
    scale(be, [0, 1, 2])
    stale = be.etcd.get(be.cfg.shard_key(2)).value
    scale(be, [0, 1])
    be.etcd.put(be.cfg.shard_key(2), stale)       # e.g. a harness killed between the stop and the removal
    scale(be, [0, 1, 2])                            # asserts a primary serves the record it waited for
    assert restores(be) == []


def test_a_scale_out_whose_announce_fails_stops_the_groups_it_started(be):
    """Review section 4: the coordinator failing outright (here its announce: the record still holds
    another migration, one to shards (0,), whose coordinator died) left the new groups running."""
    import random

    from pschaos.harness.errors import HarnessError
    from pschaos.harness.faults.base import FaultContext
    from pschaos.harness.faults.registry import build
    from pschaos.psnodes.elastic import routing
    from pschaos.psnodes.core.routing import begin, static

    trained(be)
    assert routing.swap(be.etcd, be.cfg, 0, begin(static(2), "0.0.dead", (0,)))
    f = build("scale-out-shards", FaultContext(be, random.Random(1), lambda k, v: v), "", {"to": 3})
    f.inject()
    assert 2 in be.active_shards() and be.alive("shard-2/0")
    with pytest.raises(HarnessError, match="0.0.dead is still in progress"):
        f.heal()
    assert be.active_shards() == [0, 1] and not any(be.alive(n) for n in be.cfg.shard_nodes(2))
    assert record(be, 2) is None and "groups_kept" not in f.info
