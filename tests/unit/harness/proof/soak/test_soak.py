"""pschaos soak: aggregation over fake report.json files, fail-closed verdicts, exit codes, the run loop."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pschaos.harness.machinery.tools import REPO
from pschaos.harness.proof.soak import soak
from pschaos.harness.commands.cli import main
from pschaos.harness.run.metrics import failover_stats
from pschaos.harness.proof.soak.soak import RunResult, aggregate, exit_code, judge_run

KILL_PRIMARY = REPO / "scenarios" / "kill-primary.yaml"


def fake_report(d: Path, seed: int, verdict: str, lost: int = 0, ms=(400.0,), acked: int = 100,
                moved: dict | None = None) -> None:
    d.mkdir(parents=True, exist_ok=True)
    valid = {"pass": True, "fail": False}.get(verdict, "unknown")
    checks = {"no-lost-acks": {"valid": valid, "details": {}}}
    (d / "report.json").write_text(json.dumps({
        "schema": "pschaos.report/1", "scenario": "kill-primary", "backend": "process", "seed": seed,
        "verdict": verdict, "rerun": f"pschaos run scenarios/kill-primary.yaml --seed {seed}", "checks": checks,
        "metrics": {"acked_updates": acked, "lost_acked_updates": lost, **(moved or {})},
        "faults": [{"kind": "kill", "target": "shard-0/0", "start_s": 1.0, "end_s": 1.0}],
        "failover_times": [{"ms": m} for m in ms]}))


def judged(tmp: Path, seed: int, verdict: str | None, repeat: int = 1, **kw) -> RunResult:
    d = tmp / f"seed-{seed}-r{repeat}"
    if verdict is not None:
        fake_report(d, seed, verdict, **kw)
    else:
        d.mkdir(parents=True, exist_ok=True)
    return judge_run(RunResult(seed, repeat, d, rc=0 if verdict == "pass" else 1, wall_s=10.0))


def test_failover_stats_count_failures_as_inf_never_drop_them():
    assert failover_stats([]) == {"p50": None, "p99": None, "max": None, "n": 0, "failed": 0,
                                  "failed_counted_as": "inf"}
    ok = failover_stats([300.0, 100.0, 200.0, 400.0])
    assert ok["p50"] == 300.0 and ok["p99"] == 400.0 and ok["failed"] == 0    # nearest rank, rounded up
    one_bad = failover_stats([100.0] * 9 + [None])
    assert one_bad["n"] == 10 and one_bad["failed"] == 1
    assert one_bad["p50"] == 100.0 and one_bad["p99"] == "inf" and one_bad["max"] == "inf"
    assert float(one_bad["p99"]) == float("inf")
    json.dumps(one_bad, allow_nan=False)                  # valid JSON, no Infinity literal


def test_judge_run_is_fail_closed(tmp_path):
    assert judged(tmp_path, 1, "pass").verdict == "pass"
    f = judged(tmp_path, 2, "fail")
    assert f.verdict == "fail" and "no-lost-acks" in f.reason
    missing = judged(tmp_path, 3, None)
    assert missing.verdict == "unknown" and "no report.json (exit code 1" in missing.reason
    d = tmp_path / "garbled"
    d.mkdir()
    (d / "report.json").write_text("{not json")
    bad = judge_run(RunResult(4, 1, d, rc=0))
    assert bad.verdict == "unknown" and "unreadable report.json" in bad.reason
    fake_report(tmp_path / "late", 5, "pass")           # a report does not rescue a run that timed out
    late = judge_run(RunResult(5, 1, tmp_path / "late", rc=-9, wall_s=900.0, timed_out=True))
    assert late.verdict == "unknown" and "timed out after 900 s" in late.reason
    odd = tmp_path / "odd"
    fake_report(odd, 6, "maybe")
    assert judge_run(RunResult(6, 1, odd, rc=0)).verdict == "unknown"


def test_aggregate_counts_lost_acks_failover_and_flaky_seeds(tmp_path):
    runs = [judged(tmp_path, 1, "pass", 1, ms=(100.0, 200.0)), judged(tmp_path, 1, "fail", 2, lost=3, ms=(None,)),
            judged(tmp_path, 2, "pass", 1), judged(tmp_path, 2, "pass", 2, lost=0, ms=()),
            judged(tmp_path, 3, None, 1), judged(tmp_path, 3, "unknown", 2, lost=2)]
    a = aggregate("kill-primary", runs)
    assert a["schema"] == "pschaos.soak/1" and a["runs"] == 6 and a["seeds"] == 3 and a["repeat"] == 2
    assert a["verdicts"] == {"pass": 3, "fail": 1, "unknown": 2} and a["pass_rate"] == 0.5
    lost = a["lost_acked_updates"]           # seed 3's first run has no report: no figure, so no total
    assert lost["sum"] is None and lost["per_seed"] == {"1": 3, "2": 0, "3": None} and lost["sum_of_known"] == 5
    assert lost["seeds_with_loss"] == [1, 3] and lost["runs_without_figure"] == 1
    assert a["acked_updates"] == 500
    fo = a["failover_ms"]
    assert fo["n"] == 5 and fo["failed"] == 1 and fo["p50"] == 400.0 and fo["p99"] == "inf"
    assert a["flaky_seeds"] == [1]                       # pass+unknown (seed 3) is not pass+fail
    assert a["per_seed"] == {"1": ["pass", "fail"], "2": ["pass", "pass"], "3": ["unknown", "unknown"]}
    assert [b["seed"] for b in a["failing"]] == [1] and a["failing"][0]["rerun"].endswith("--seed 1")
    assert [b["seed"] for b in a["unknown"]] == [3, 3]
    json.dumps(a, allow_nan=False)
    text = soak.summary(a, tmp_path)
    assert "3/6 runs passed" in text and "flaky seeds (pass and fail): 1" in text and "p99 inf" in text
    assert "lost acknowledged updates: unknown: 1 run(s) without a figure (at least 5 in the others)" in text


def test_aggregate_pools_migration_unavailability_over_runs(tmp_path):
    """The p99 of moved-key unavailability is taken over every migration of every run, not of the
    runs' own p99s; migrations with no ack after the fence are counted apart, never filled in."""
    runs = [judged(tmp_path, 1, "pass", moved={"migrations": 3, "migration_unavailable_samples_ms": [90.0, 100.0]}),
            judged(tmp_path, 2, "pass", moved={"migrations": 2, "migration_unavailable_samples_ms": [80.0, 900.0]}),
            judged(tmp_path, 3, "pass")]
    a = aggregate("scale-out-shards", runs)
    assert a["migrations"] == 5 and a["migration_unavailable_unobserved"] == 1
    mu = a["migration_unavailable_ms"]
    assert mu["n"] == 4 and mu["p50"] == 100.0 and mu["p99"] == 900.0 and mu["max"] == 900.0
    text = soak.summary(a, tmp_path)
    assert "over 5 migration(s): p50 100.0 p99 900.0 max 900.0 ms; 1 with no ack observed" in text
    plain = aggregate("kill-primary", [judged(tmp_path, 4, "pass")])
    assert plain["migration_unavailable_ms"] is None and "migration(s)" not in soak.summary(plain, tmp_path)


def test_exit_codes(tmp_path):
    def code(*verdicts):
        d = tmp_path / "-".join(map(str, verdicts))
        return exit_code(aggregate("s", [judged(d, i, v) for i, v in enumerate(verdicts)]))
    assert code("pass", "pass") == 0
    assert code("pass", "fail", "unknown") == 1
    assert code("pass", None) == 3
    assert code("unknown") == 3


def test_cli_writes_soak_json_and_html(tmp_path, monkeypatch, capsys):
    verdicts = {1: "pass", 2: "pass", 3: None}

    def fake_execute(scenario, plan, out, par, backend, repeats, timeout_s, progress):
        assert scenario == KILL_PRIMARY and par == 2 and repeats == 1
        return [judged(out, s, verdicts[s]) for s, _ in plan]

    monkeypatch.setattr(soak, "execute", fake_execute)
    out = tmp_path / "soak"
    rc = main(["soak", "kill-primary", "--seeds", "3", "-j", "2", "--out", str(out)])
    assert rc == 3                                       # seed 3 left no report: unknown, not a pass
    a = json.loads((out / "soak.json").read_text())
    assert a["verdicts"] == {"pass": 2, "fail": 0, "unknown": 1}
    html = (out / "report.html").read_text()
    assert "2/3 passed" in html                          # the reportless run is counted in the HTML too
    assert "pschaos soak kill-primary: 2/3 runs passed" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--seeds", "0"], ["--seeds", "2", "-n", "0"], ["--seeds", "2", "--repeat", "0"],
                                  ["--seeds", "2", "--timeout", "0"]])
def test_bad_numbers_exit_2(argv, tmp_path):
    assert main(["soak", str(KILL_PRIMARY), *argv, "--out", str(tmp_path)]) == 2


def test_bad_scenario_exits_2_before_any_run(tmp_path, monkeypatch):
    monkeypatch.setattr(soak, "execute", lambda *a, **k: pytest.fail("ran a run for a bad scenario"))
    assert main(["soak", str(tmp_path / "nope.yaml"), "--seeds", "2"]) == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncluster: {shards: -1}\n")
    assert main(["soak", str(bad), "--seeds", "2"]) == 2


FAKE_RUN = """
import json, sys, time, pathlib
seed, out = int(sys.argv[1]), pathlib.Path(sys.argv[2])
if seed == 3:
    time.sleep(60)                                       # hangs: the soak interrupts it
if seed == 4:
    sys.exit(2)                                          # crashes before writing a report
json.dump({"scenario": "fake", "seed": seed, "verdict": "pass" if seed != 2 else "fail", "checks": {},
           "metrics": {"lost_acked_updates": seed == 2, "acked_updates": 10}, "faults": []},
          open(out / "report.json", "w"))
"""


def test_execute_runs_in_parallel_and_interrupts_hung_runs(tmp_path, monkeypatch):
    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    monkeypatch.setattr(soak, "_command", lambda sc, seed, backend, d: [sys.executable, str(script), str(seed), str(d)])
    monkeypatch.setattr(soak, "INTERRUPT_GRACE_S", 5.0)
    out = tmp_path / "out"
    (out / "seed-1").mkdir(parents=True)
    (out / "seed-1" / "report.json").write_text('{"verdict": "fail"}')   # stale: must not be read
    lines: list[str] = []
    runs = soak.execute(Path("x.yaml"), [(s, 1) for s in (1, 2, 3, 4)], out, 2, "process", 1, 3.0, lines.append)
    got = {r.seed: r.verdict for r in runs}
    assert got == {1: "pass", 2: "fail", 3: "unknown", 4: "unknown"}
    assert next(r for r in runs if r.seed == 3).timed_out
    assert "exit code 2" in next(r for r in runs if r.seed == 4).reason
    assert len(lines) == 4 and all((out / f"seed-{s}" / "soak-run.log").exists() for s in (1, 2, 3, 4))


def test_a_seed_whose_repeats_are_none_and_0_is_unknown_not_0(tmp_path):
    """[None, 0] over a seed's repeats is no figure for the seed, and none for the soak: a program
    reading `sum` must not see a pass-looking 0 while a run was never judged."""
    runs = [judged(tmp_path, 1, "pass", 1, lost=0), judged(tmp_path, 1, "unknown", 2, lost=None),
            judged(tmp_path, 2, "pass", 1, lost=0)]
    lost = aggregate("kill-primary", runs)["lost_acked_updates"]
    assert lost["per_seed"] == {"1": None, "2": 0} and lost["sum"] is None and lost["seeds_with_loss"] == []
    assert "unknown: 1 run(s) without a figure" in soak.summary(aggregate("kill-primary", runs), tmp_path)
    every = aggregate("kill-primary", [judged(tmp_path, 3, "pass", 1, lost=0), judged(tmp_path, 4, "pass", 1, lost=0)])
    assert every["lost_acked_updates"]["sum"] == 0 and "lost acknowledged updates: 0 in total" in soak.summary(every, tmp_path)


@pytest.mark.parametrize("value,want", [(None, (False, None)), ("ray", (True, None)),
                                        ("ray=127.0.0.1:6379", (True, "127.0.0.1:6379"))])
def test_on_ray_parses(value, want):
    assert soak.parse_on(value) == want


@pytest.mark.parametrize("value", ["dask", "ray=", "kubernetes=x", "ray=local"])
def test_on_anything_but_ray_exits_2_naming_the_fix(value, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(soak, "execute", lambda *a, **k: pytest.fail("ran a run for a bad --on"))
    assert main(["soak", "kill-primary", "--seeds", "2", "--on", value, "--out", str(tmp_path)]) == 2
    assert "--on ray=ADDRESS" in capsys.readouterr().err


def test_runs_on_ray_name_their_node_in_soak_json(tmp_path):
    runs = [judged(tmp_path, s, "pass") for s in (1, 2)]
    runs[0].where, runs[1].where = "node-a", "node-b"
    a = aggregate("kill-primary", runs)
    assert a["ray_nodes"] == {"seed-1-r1": "node-a", "seed-2-r1": "node-b"}
    assert "ray_nodes" not in aggregate("kill-primary", [judged(tmp_path, 3, "pass")])


def test_on_ray_refuses_the_docker_backend(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(soak, "execute", lambda *a, **k: pytest.fail("ran a run"))
    assert main(["soak", "kill-primary", "--seeds", "2", "--backend", "docker", "--on", "ray", "--out", str(tmp_path)]) == 2
    assert "run it here without --on" in capsys.readouterr().err
