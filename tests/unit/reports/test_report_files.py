"""junit.xml validates against the JUnit schema CI systems read; summary.md says what failed."""
from pathlib import Path

import xmlschema

from pschaos.reports import junit, markdown

SCHEMA = xmlschema.XMLSchema(str(Path(junit.__file__).parent / "schemas" / "junit.xsd"))

REPORT = {"schema": "pschaos.report/1", "scenario": "kill-primary", "backend": "process", "seed": 7,
          "verdict": "fail", "rerun": "pschaos run scenarios/kill-primary.yaml --backend process --seed 7",
          "wall_s": 12.5,
          "checks": {"no-lost-acks": {"valid": False, "details": {"lost": 2, "examples": [{"req_id": 9}]}},
                     "single-primary": {"valid": True, "details": {}},
                     "delta-complete": {"valid": "unknown", "details": {"error": "KeyError: 'x' <&>"}}},
          "metrics": {"acked_updates": 10, "lost_acked_updates": 2, "failovers": 1,
                      "failover_ms": {"p50": 480.0, "p99": 490.0, "max": 490.0}, "final_loss": 0.02,
                      "sync_bytes": 1, "changed_bytes": 1, "snapshot_bytes": 9},
          "faults": [{"kind": "kill", "target": "shard-0/0", "start_s": 3.1, "end_s": 9.0}]}


def test_junit_validates_and_carries_the_evidence(tmp_path):
    path = junit.write(REPORT, tmp_path)
    SCHEMA.validate(str(path))
    text = path.read_text()
    assert 'failures="1"' in text and 'errors="1"' in text and 'tests="3"' in text
    assert "CheckFailed" in text and "req_id" in text and "--seed 7" in text and "&lt;&amp;&gt;" in text


def test_junit_of_a_passing_run_validates(tmp_path):
    ok = dict(REPORT, verdict="pass", checks={"x": {"valid": True, "details": {"n": 1}}})
    SCHEMA.validate(str(junit.write(ok, tmp_path)))


def test_schema_rejects_what_ci_would_reject(tmp_path):
    p = tmp_path / "bad.xml"
    p.write_text('<testsuites><testsuite name="x" tests="1"><testcase name="a"/></testsuite></testsuites>')
    assert not SCHEMA.is_valid(str(p))


def test_summary_markdown(tmp_path):
    text = markdown.write(REPORT, tmp_path).read_text()
    assert "kill-primary`: FAIL" in text and "| no-lost-acks | **FAIL** |" in text
    assert "| delta-complete | unknown |" in text and "`pschaos run scenarios/kill-primary.yaml" in text


def test_an_excluded_check_is_a_skipped_case_with_its_reason_in_junit_and_the_summary(tmp_path):
    rep = dict(REPORT, excluded_checks={"converged": "forty steps: the model cannot reach its target loss"})
    path = junit.write(rep, tmp_path)
    SCHEMA.validate(str(path))
    text = path.read_text()
    assert 'skipped="1"' in text and 'tests="4"' in text and "excluded by the scenario: forty steps" in text
    assert "| converged | excluded: forty steps" in markdown.write(rep, tmp_path).read_text()
