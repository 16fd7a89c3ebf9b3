"""The audit tensor is an oracle independent of the PS's bookkeeping: a PS that records an
update's idempotency key but skips the update itself fails no-lost-acks, though every acked key
is in its applied set. Shown on a copy of psnodes with that bug planted, and on the real code."""
import pytest

from tests.unit.helpers import only_text

from .mutants import mutant_copy, run_scenario

pytestmark = pytest.mark.integration

SCENARIO = """\
name: audit-oracle
cluster: {shards: 2, copies: 2, workers: 2, replication: sync, training: async, model: mlp}
workload: {steps: 40}
expect:
  checks: [no-lost-acks, exactly-once, replicas-match]
"""
SKIP_VALUES = {"psnodes/store/store.py": [(
    "            for name, (value, slots) in dense.items():",
    "            for name, (value, slots) in (dense.items() if upd.req_id % 10 else []):   # planted: value dropped")]}


@pytest.mark.parametrize("planted", [False, True], ids=["real", "key-kept-value-dropped"])
def test_audit_sees_what_the_bookkeeping_hides(tmp_path, planted):
    root = mutant_copy(tmp_path / "code", SKIP_VALUES if planted else {})
    sc = tmp_path / "audit-oracle.yaml"
    sc.write_text(only_text(SCENARIO, "40 steps: no checkpoint, no target loss; the audit is what this test is about"))
    code, rep, out = run_scenario(root, sc, tmp_path / "out")
    checks = rep["checks"]
    if not planted:
        assert code == 0 and rep["verdict"] == "pass", out
        return
    assert code == 1 and rep["verdict"] == "fail", out
    d = checks["no-lost-acks"]["details"]
    assert checks["no-lost-acks"]["valid"] is False and d["lost_keys"] == 0 and d["audit_short"], d
    assert checks["exactly-once"]["valid"] is False      # audit disagrees with the applied keys
