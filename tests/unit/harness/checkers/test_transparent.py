"""migration-transparent (issue 32, item 9's cross-check): with one worker and migrations as the
only faults, the run ends with the fault-free run's model bit for bit. The planted
handoff-resets-steps failed it on scale-out-one-worker-transparent (beside handoff-continuity)."""
from __future__ import annotations

from pschaos.harness.checkers import CHECKERS
from pschaos.harness.checkers.transparent import model_of
from pschaos.psnodes.placement import owner

from tests.unit.histories import ev

NAMES = [f"l{i}.w" for i in range(8)]


def history(shards=(0, 1), workers=1, kinds=("scale-out-shards",), switched=True, crc=None, rows=None,
            primaries=None, steps=300, extra=()):
    """A run's history: one primary per shard holding the names it owns with state digest 1 each
    (`crc` overrides some), its rows' hash per table (`rows`: shard -> hex)."""
    h = [ev(0.0, "run-start", {"cluster": {"shards": 2, "workers": workers}}, node="harness")]
    h += [ev(1.0, "fault-start", {"kind": k}, node="harness") for k in kinds]
    if switched and kinds:
        h.append(ev(2.0, "migration-switch", {"migration": "m", "routing_epoch": 1, "shards": list(shards)},
                    node="harness"))
    for s in shards:
        if primaries is not None and s not in primaries:
            continue
        digests = {n: (crc or {}).get(n, 1) for n in NAMES if owner(n, shards) == s}
        digests[f"__audit__/{s}"] = 100 + s                      # a shard's own audit: placement, left out
        h.append(ev(9.0, "final-state", {"node": f"shard-{s}/0", "shard": s, "alive": True, "role": "primary",
                                         "holdings": {"under": list(shards), "digests": digests,
                                                      "row_digests": {"emb": {str(s): (rows or {}).get(s, "0" * 16)}}}},
                    node=f"shard-{s}/0"))
    h.append(ev(9.5, "train-done", {"worker": "worker-0", "steps": steps}, node="worker-0"))
    return h + list(extra)


BASE = model_of(history(kinds=(), rows={0: "0" * 15 + "3"}))[0]


def judge(h, base=BASE):
    return CHECKERS["migration-transparent"](h, {"baseline_model": base})


def test_the_same_model_on_another_shard_set_passes():
    v = judge(history(shards=(0, 1, 2), rows={0: "0" * 15 + "1", 2: "0" * 15 + "2"}))
    assert v.valid is True, v.details


def test_a_key_or_a_table_that_ends_different_fails():
    three = (0, 1, 2)
    moved = next(n for n in NAMES if owner(n, three) == 2)
    assert judge(history(shards=three, crc={moved: 9}, rows={0: "0" * 15 + "3"})).details["differ"] == [moved]
    assert judge(history(shards=three, rows={0: "0" * 15 + "4"})).details["tables_differ"] == ["emb"]


def test_where_two_runs_need_not_agree_or_nothing_is_known_it_is_unknown():
    rows = {0: "0" * 15 + "3"}
    assert judge(history(workers=2, rows=rows)).valid == "unknown"
    assert judge(history(kinds=("scale-out-shards", "kill"), rows=rows)).valid == "unknown"
    assert judge(history(switched=False, rows=rows)).valid == "unknown"
    assert judge(history(rows=rows), base=None).valid == "unknown"
    assert judge(history(rows=rows, primaries={0})).valid == "unknown"           # shard 1 has no primary
    assert judge(history(rows=rows, steps=299)).valid == "unknown"
    failover = ev(5.0, "promote", {"shard": 0, "epoch": 2, "node": "shard-0/1", "seq": 9}, node="shard-0/1")
    assert judge(history(rows=rows, extra=[failover])).valid == "unknown"


def test_a_migrating_audit_bucket_counting_one_more_delivery_is_not_the_model():
    """A migrating audit bucket counts the push parts its owner applied, not model updates: at the
    switch one step's push may reach a moved bucket twice (the old owner applied it before the
    fence, another shard's rejected push was split and its part carried the bucket to the new
    owner). scale-out-one-worker-transparent on processes, seed 1, 2026-12-06: __audit__/m3, m14,
    m17 and m23 (the buckets moving from shard 1 to shard 2) differed and the model did not."""
    three = (0, 1, 2)
    bucket = next(f"__audit__/m{b}" for b in range(24) if owner(f"__audit__/m{b}", three) == 2)
    base = history(kinds=(), rows={0: "0" * 15 + "3"})
    for e in base:
        if e["f"] == "final-state" and owner(bucket, (0, 1)) == e["value"]["shard"]:
            e["value"]["holdings"]["digests"][bucket] = 300
    moved = history(shards=three, rows={0: "0" * 15 + "1", 2: "0" * 15 + "2"})
    for e in moved:
        if e["f"] == "final-state" and e["value"]["shard"] == 2:
            e["value"]["holdings"]["digests"][bucket] = 301
    v = judge(moved, base=model_of(base)[0])
    assert v.valid is True and bucket not in v.details["differ"], v.details
