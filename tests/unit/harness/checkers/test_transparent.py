"""migration-transparent (issue 32, item 9's cross-check): with one worker and migrations as the
only faults, the run ends with the fault-free run's model bit for bit. The planted
handoff-resets-steps failed it on scale-out-one-worker-transparent (beside handoff-continuity)."""
from __future__ import annotations

from pschaos.harness.checkers import CHECKERS

from tests.unit.histories import ev

BASE = {"dense": {"w": 1, "b": 2, "__audit__/0": 5}, "rows": {"emb": "00000000000000ff"}}


def run(workers=1, kinds=("scale-out-shards",), w=1, emb=("0" * 14 + "f0", "0" * 14 + "0f"), audit=7):
    h = [ev(0.0, "run-start", {"cluster": {"shards": 2, "workers": workers}}, node="harness")]
    h += [ev(1.0, "fault-start", {"kind": k}, node="harness") for k in kinds]
    for s, digests in ((0, {"w": w, "__audit__/0": audit}), (1, {"b": 2})):
        h.append(ev(9.0, "final-state", {"node": f"shard-{s}/0", "shard": s, "alive": True, "role": "primary",
                                         "holdings": {"digests": digests, "row_digests": {"emb": {str(s): emb[s]}}}},
                    node=f"shard-{s}/0"))
    return h


def judge(h, base=BASE):
    return CHECKERS["migration-transparent"](h, {"baseline_model": base})


def test_the_same_model_passes_whatever_the_placement_and_a_shards_own_audit_is_left_out():
    v = judge(run())
    assert v.valid is True, v.details


def test_a_key_or_a_table_that_ends_different_fails():
    assert judge(run(w=9)).details["differ"] == ["w"]
    assert judge(run(emb=("0" * 16, "0" * 14 + "0f"))).details["tables_differ"] == ["emb"]


def test_where_two_runs_need_not_agree_or_nothing_is_known_it_is_unknown():
    assert judge(run(workers=2)).valid == "unknown"
    assert judge(run(kinds=("scale-out-shards", "kill"))).valid == "unknown"
    assert judge(run(kinds=())).valid == "unknown"
    assert judge(run(), base=None).valid == "unknown"
