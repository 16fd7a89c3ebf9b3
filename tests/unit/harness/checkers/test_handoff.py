"""handoff-continuity (issue 32, item 9): a moved key arrives whole. The planted
handoff-resets-steps (tests/zoo: Adam's step count reset at the destination) and
handoff-without-dedup failed it on scale-out-shards; the old checks passed the first."""
from __future__ import annotations

import numpy as np

from pschaos.harness.checkers import CHECKERS
from pschaos.psnodes.store import moving
from pschaos.psnodes.store.blob import pack

from tests.unit.histories import ev
from tests.unit.helpers import store

SWITCH = ev(3.0, "migration-switch", {"migration": "m", "routing_epoch": 1, "shards": [0, 1]}, node="harness")


def imported(**v):
    return ev(2.0, "migrate-imported", {"shard": 1, "migration": "m", "seq": 5, "epoch": 1, "part": "copy", "from": 0,
                                        "keys": 2, "digests": True, "differ": [], "differ_count": 0,
                                        "applied_missing": [], "applied_missing_count": 0, **v}, node="shard-1/0")


def test_an_import_that_differs_from_its_source_or_lost_its_dedup_state_fails():
    assert CHECKERS["handoff-continuity"]([imported(), SWITCH], {}).valid is True
    assert CHECKERS["handoff-continuity"]([imported(differ=["w"], differ_count=1), SWITCH], {}).valid is False
    assert CHECKERS["handoff-continuity"]([imported(applied_missing=["worker-0#1@0"], applied_missing_count=1),
                                           SWITCH], {}).valid is False


def test_a_switched_migration_without_digests_is_unknown():
    assert CHECKERS["handoff-continuity"]([imported(digests=False), SWITCH], {}).valid == "unknown"
    assert CHECKERS["handoff-continuity"]([SWITCH], {}).valid == "unknown"


def test_the_digest_covers_value_slots_and_step_count():
    s = store("adam")
    s.dense["w"] = np.ones((2, 2), dtype=np.float32)
    s.dense_slots["w"] = {"m": np.zeros((2, 2), dtype=np.float32), "v": np.zeros((2, 2), dtype=np.float32)}
    s.dense_steps["w"] = 7
    d = moving.key_digests(s, ["w"])["w"]
    s.dense_steps["w"] = 0
    assert moving.key_digests(s, ["w"])["w"] != d
    s.dense_steps["w"] = 7
    s.dense_slots["w"]["v"][0, 0] = 1.0
    assert moving.key_digests(s, ["w"])["w"] != d
    blob = pack({"dense": ["w"], "digests": {"w": d}, "applied": {"worker-0#1@0": [[1, 3]]}, "part": "copy", "from": 0},
                {})
    rec = moving.import_record(s, blob)
    assert rec["differ"] == ["w"] and rec["applied_missing"] == ["worker-0#1@0"]


def test_every_import_the_switch_names_needs_its_own_record_with_both_counts():
    """One judged import of a migration passed it whatever became of its other sources and parts,
    and a record without its counts read as no difference (review of issue 32, finding 9)."""
    listed = ev(3.0, "migration-switch", {"migration": "m", "routing_epoch": 1, "shards": [0, 1, 2],
                                          "imports": [[0, 1, "copy"], [0, 2, "copy"], [0, 1, "delta"]]}, node="harness")
    all_three = [imported(), imported(shard=2), imported(part="delta")]
    assert CHECKERS["handoff-continuity"]([*all_three, listed], {}).valid is True
    v = CHECKERS["handoff-continuity"]([imported(), imported(part="delta"), listed], {})
    assert v.valid == "unknown" and "['m', 0, 2, 'copy']" in v.details["reason"], v.details
    for field in ("differ_count", "applied_missing_count"):
        rec = imported()
        del rec["value"][field]
        v = CHECKERS["handoff-continuity"]([rec, imported(shard=2), imported(part="delta"), listed], {})
        assert v.valid == "unknown" and field in str(v.details), v.details


def test_moved_embedding_rows_are_digested_and_checked_at_the_destination():
    """Review of issue 32, finding 3: key_digests covered dense keys only, so rows reset or lost in
    a hand-off passed every check (tests/zoo: handoff-resets-row-steps). The source now digests a
    table's moved rows (ids, values, slots, step counts) and the destination checks them."""
    from pschaos.psnodes.placement import row_owners
    from pschaos.psnodes.proto import ps_pb2
    from pschaos.psnodes.store.optimizers import OptimizerConfig
    from pschaos.psnodes.store.state import ShardSpec
    from pschaos.psnodes.store.store import ShardStore
    from pschaos.psnodes.wire.codec import rows_to_pb

    def mk(shard: int) -> ShardStore:
        return ShardStore(ShardSpec(shard=shard, num_shards=2, tables={"emb": 4},
                                    optimizer=OptimizerConfig("adam", lr=0.05), seed=3))

    src = mk(0)
    ids = np.arange(400)
    ids = ids[row_owners("emb", ids, (0, 1)) == 0]
    for r in (1, 2):
        u = ps_pb2.Update(worker="worker-0", req_id=r)
        u.sparse.append(rows_to_pb("emb", ids, np.full((ids.size, 4), 0.1), 4))
        src.apply(src.validate(u), u.SerializeToString(), 1)
    blob, _, _ = moving.export_keys(src, 2, [0, 1], [0, 1, 2], 0)
    meta, arrays = moving.unpack(blob)
    blob = pack({**meta, "migration": "m", "part": "copy"}, arrays)
    dst = mk(2)
    dst.apply(dst.validate(u := ps_pb2.Update(kind=ps_pb2.Update.MIGRATE, meta=blob)), u.SerializeToString(), 1)
    rec = moving.import_record(dst, blob)
    assert rec["rows"] > 0 and rec["row_digests"] and rec["differ"] == [], rec
    t = dst.tables["emb"]
    t.steps[: t.n] = 0                                  # what the planted bug leaves
    assert moving.import_record(dst, blob)["differ"] == ["rows of emb"]
    rows = imported(rows=rec["rows"], row_digests=False)
    v = CHECKERS["handoff-continuity"]([rows, SWITCH], {})
    assert v.valid == "unknown" and "no digest" in v.details["reason"]
    assert CHECKERS["handoff-continuity"]([imported(rows=rec["rows"], row_digests=True), SWITCH], {}).valid is True
