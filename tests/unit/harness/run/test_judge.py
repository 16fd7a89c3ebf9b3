"""Judging is a pure function of history.jsonl: `pschaos check` re-judges a saved run offline."""
import json

import pytest

from pschaos.harness.commands.cli import main
from pschaos.harness.errors import HarnessError
from pschaos.harness.run.judge import judge

from tests.unit.histories import acked, done, ev, final, promote


def _history(expect_checks, audit="auto"):
    ctx = {"replication": "sync", "max_lag": 8, "workers": ["worker-0"], "steps": 10, "training": "async",
           "scheduled_faults": 0, "baseline_loss": None}
    start = ev(0, "run-start", {"scenario": "s", "context": ctx,
                                "expect": {"checks": expect_checks, "metrics": ["lost_acked_updates == 0"]}})
    return [start, promote(0.1, 0, 1, "shard-0/0"), *acked(0.2, 0.3, "worker-0", 1, 0, 1, 1),
            done("worker-0"), final("shard-0/0", 0, "primary", 1, 1, {"worker-0#1": [[1, 1]]}, audit=audit),
            ev(0.4, "progress-watch", {"bound_s": 90.0, "polls": 1, "steps_seen": 1, "longest_quiet_s": 0.0})]


def _write(tmp_path, h):
    p = tmp_path / "history.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in h))
    return p


def test_judge_reads_everything_from_the_history():
    j = judge(_history(["no-lost-acks", "single-primary", "converged"]))
    assert j.verdict == "pass", {k: v.details for k, v in j.checks.items()}
    assert set(j.checks) == {"no-lost-acks", "single-primary", "converged", "scenario-ran", "nodes-back",
                             "progress", "metric-bounds"}


def test_judge_refuses_a_history_without_run_start():
    with pytest.raises(HarnessError, match="run-start"):
        judge(_history(["converged"])[1:])


def test_check_exit_codes(tmp_path, capsys):
    assert main(["check", str(_write(tmp_path, _history(["no-lost-acks"])))]) == 0
    assert "PASS" in capsys.readouterr().out
    bad = _history(["no-lost-acks"], audit={"worker-0": 0})
    assert main(["check", str(_write(tmp_path, bad))]) == 1
    unknown = _history(["no-lost-acks"], audit=None)
    assert main(["check", str(_write(tmp_path, unknown))]) == 3
    assert main(["check", str(tmp_path / "nope.jsonl")]) == 2


def test_an_empty_check_list_is_unknown():
    j = judge(_history([]))
    assert j.verdict == "unknown" and j.checks["checks"].valid == "unknown"


def test_a_failed_metric_bound_of_a_run_whose_fault_never_fired_is_unknown_not_fail():
    """The fault was refused (a kind the backend cannot do): `failovers >= 1` fails, but it
    judges a run that did not happen, so the verdict is unknown, never fail (nor pass)."""
    h = _history(["no-lost-acks"])
    h[0]["value"]["context"]["scheduled_faults"] = 1
    h[0]["value"]["expect"]["metrics"] = ["failovers >= 1"]
    h.insert(1, ev(0.05, "fault-error", {"kind": "memory-limit", "selector": "primary(shard=0)", "index": 0,
                                         "error": "HarnessError: not on this backend"}))
    j = judge(h)
    assert j.checks["scenario-ran"].valid == "unknown"
    assert j.checks["metric-bounds"].valid == "unknown" and j.verdict == "unknown"
