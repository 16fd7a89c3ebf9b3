"""`pschaos selftest`'s scoring, report and scheduling, without a cluster: verdicts are fail
closed (an unknown run is no kill), the baseline gates the score, a mutant's queue ends at its
first kill and its running siblings are stopped, bad flags exit 2 with the fix."""
from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from pathlib import Path

import pytest

from pschaos.harness.proof.selftest import exec as selftest_exec
from pschaos.harness.proof.selftest.mutation import Mutant
from pschaos.harness.proof.selftest.selftest import BadInput, order, validate
from pschaos.harness.proof.selftest.exec import Task, _next, run_queues
from pschaos.harness.proof.selftest.score import (MutantResult, RunOutcome, baseline_verdict, exit_code, mutant_status,
                                    outcome_from_report, report, text)


def run(verdict: str, mutant: str | None = "m", scenario: str = "kill-primary", seed: int = 1,
        failed: tuple[str, ...] = ()) -> RunOutcome:
    return RunOutcome(mutant, scenario, seed, Path("/x"), verdict=verdict, failed_checks=list(failed))


def rep_of(checks: dict, verdict: str) -> dict:
    return {"verdict": verdict, "checks": {k: {"valid": v} for k, v in checks.items()}, "rerun": "pschaos run x"}


def test_outcome_takes_failed_and_undecided_checks_from_the_report():
    o = outcome_from_report(run("unknown"), rep_of({"no-lost-acks": False, "converged": "unknown",
                                                    "exactly-once": True, "scenario-ran": True}, "fail"))
    assert (o.verdict, o.failed_checks, o.unknown_checks, o.rerun) == ("fail", ["no-lost-acks"], ["converged"],
                                                                        "pschaos run x")
    o = outcome_from_report(run("pass"), None, "timed out after 600 s")
    assert o.verdict == "unknown" and o.reason == "timed out after 600 s"
    o = outcome_from_report(run("pass"), {"verdict": "weird"})
    assert o.verdict == "unknown"


def test_a_metric_bound_alone_without_evidence_that_the_scenario_ran_is_no_kill():
    o = outcome_from_report(run("unknown"), rep_of({"scenario-ran": "unknown", "metric-bounds": False}, "fail"))
    assert o.verdict == "unknown" and "scenario-ran" in o.reason
    o = outcome_from_report(run("unknown"), rep_of({"scenario-ran": True, "metric-bounds": False}, "fail"))
    assert o.verdict == "fail" and o.failed_checks == ["metric-bounds"]
    # a checker's False is evidence of its own, whether or not every fault ran its full time
    o = outcome_from_report(run("unknown"), rep_of({"scenario-ran": "unknown", "metric-bounds": False,
                                                    "no-lost-acks": False}, "fail"))
    assert o.verdict == "fail" and o.failed_checks == ["metric-bounds", "no-lost-acks"]


def test_only_a_failing_run_kills_and_an_unknown_one_is_reported_as_such():
    assert mutant_status([run("pass"), run("fail")]) == "killed"
    assert mutant_status([run("pass"), run("pass")]) == "survived"
    assert mutant_status([run("pass"), run("unknown")]) == "unknown"
    assert mutant_status([]) == "unknown"


def test_the_baseline_passes_only_when_every_planned_run_passed():
    assert baseline_verdict([run("pass", None)] * 3, 3) == "pass"
    assert baseline_verdict([run("pass", None)] * 2, 3) == "unknown"     # stopped early or interrupted
    assert baseline_verdict([run("pass", None), run("unknown", None)], 2) == "unknown"
    assert baseline_verdict([run("fail", None)], 3) == "fail"


def result(name: str, runs: list[RunOutcome], checker: str = "no-lost-acks") -> MutantResult:
    return MutantResult(name, "d", "m", checker, "core", runs)


def test_score_report_text_and_exit_codes():
    base = [run("pass", None)]
    rs = [result("a", [run("fail", "a", failed=("no-lost-acks",))]), result("b", [run("pass", "b")]),
          result("c", [run("unknown", "c")])]
    rep = report("sim", ["kill-primary"], [1], base, 1, rs, 12.0)
    assert rep["score"] == round(1 / 3, 4) and rep["counts"] == {"killed": 1, "survived": 1, "unknown": 1}
    a = rep["mutants"][0]
    assert a["killed_by"]["scenario"] == "kill-primary" and a["expected_checker_failed"] is True
    assert exit_code(rep, 0.3) == 0 and exit_code(rep, 0.9) == 1
    out = text(rep)
    assert "baseline (unmodified code): PASS" in out and "KILLED" in out and "SURVIVED" in out
    assert out.index("baseline") < out.index("mutation score")
    json.dumps(rep, default=str)


def test_a_baseline_that_does_not_pass_gives_no_score():
    failed = report("sim", ["kill-primary"], [1], [run("fail", None, failed=("converged",))], 1, [], 1.0)
    assert failed["score"] is None and exit_code(failed, 0.0) == 1
    assert "no mutant was run" in text(failed)
    unknown = report("sim", ["kill-primary"], [1], [run("unknown", None)], 1, [], 1.0)
    assert unknown["score"] is None and exit_code(unknown, 0.0) == 3


MUT = Mutant("m", "d", "x", {}, "no-lost-acks", ("b", "zz-not-in-suite", "c"))


def test_likely_scenarios_come_first_and_only_those_of_the_suite():
    assert order(MUT, ["a", "b", "c", "d"], [1, 2]) == [("b", 1), ("b", 2), ("c", 1), ("c", 2), ("a", 1), ("a", 2),
                                                        ("d", 1), ("d", 2)]


def args(**kw) -> argparse.Namespace:
    base = dict(backend="sim", seeds=1, par=2, timeout=600.0, scenarios=None, mutants=None)
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("kw, words", [
    (dict(backend="docker"), "process or sim"), (dict(backend="proces"), "process or sim"),
    (dict(seeds=0), "--seeds 0"), (dict(par=0), "-j 0"), (dict(timeout=0), "--timeout"),
    (dict(mutants="m,nope"), "unknown mutant nope"), (dict(mutants=" , "), "empty list"),
    (dict(scenarios="kill-primary,nope"), "unknown scenario nope")])
def test_bad_input_names_the_flag_and_what_to_use(kw, words):
    with pytest.raises(BadInput, match=words):
        validate(args(**kw), [MUT])


def test_validate_picks_mutants_and_suite():
    mutants, suite = validate(args(mutants="m", scenarios="kill-primary"), [MUT])
    assert [m.name for m in mutants] == ["m"] and suite == ["kill-primary"]


def test_each_mutant_gets_one_run_at_a_time_while_others_wait():
    t = lambda k, s: Task(k, s, 1, Path("/"), Path("/"))   # noqa: E731
    qs = {"a": deque([t("a", "1"), t("a", "2")]), "b": deque([t("b", "1")])}
    first = _next(qs, [])
    busy = [selftest_exec._Running(first, None, 0.0)]
    assert (first.key, _next(qs, busy).key) == ("a", "b")
    assert _next(qs, busy).key == "a"          # nothing else left: a second run of a


def fake_command(verdicts: dict[str, str]):
    """`pschaos run` stand-ins: write a report.json with the scenario's verdict ('sleep': hang)."""
    def command(task: Task, backend: str) -> list[str]:
        v = verdicts[task.scenario]
        rep = json.dumps(rep_of({"no-lost-acks": v != "fail", "scenario-ran": True}, v)) if v in ("pass", "fail") else ""
        code = ("import sys, time, pathlib\n"
                + ("time.sleep(60)\n" if v == "sleep" else "")
                + (f"pathlib.Path({str(task.dir / 'report.json')!r}).write_text({rep!r})\n" if rep else "")
                + "sys.exit(0)\n")
        return [sys.executable, "-c", code]
    return command


def test_a_queue_ends_at_its_first_kill_and_its_running_sibling_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(selftest_exec, "command", fake_command(
        {"kills": "fail", "passes": "pass", "hangs": "sleep", "crashes": "none"}))
    monkeypatch.setattr(selftest_exec, "SIBLING_GRACE_S", 5.0)
    mk = lambda k, s: Task(k, s, 1, Path.cwd(), tmp_path / k / s)   # noqa: E731
    qs = {"m": deque([mk("m", "hangs"), mk("m", "kills"), mk("m", "passes")]),
          "n": deque([mk("n", "passes"), mk("n", "crashes")])}
    seen: list[RunOutcome] = []

    def on(o: RunOutcome) -> str | None:
        seen.append(o)
        return "queue" if o.verdict == "fail" else None

    run_queues(qs, 2, "sim", 30.0, on)
    got = {(o.mutant, o.scenario): o.verdict for o in seen}
    assert got[("m", "kills")] == "fail" and ("m", "passes") not in got     # dropped after the kill
    assert ("m", "hangs") not in got                                        # stopped, not judged
    assert got[("n", "passes")] == "pass" and got[("n", "crashes")] == "unknown"   # no report: unknown


def test_a_run_past_its_timeout_is_stopped_and_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(selftest_exec, "command", fake_command({"hangs": "sleep"}))
    seen: list[RunOutcome] = []
    run_queues({"m": deque([Task("m", "hangs", 1, Path.cwd(), tmp_path / "h")])}, 1, "sim", 1.0,
               lambda o: seen.append(o))
    assert seen[0].verdict == "unknown" and "timed out" in seen[0].reason
