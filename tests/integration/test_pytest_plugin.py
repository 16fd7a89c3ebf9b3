"""The pytest plugin, tested with pytester in subprocesses: on the twin (`--pschaos-backend sim`)
wherever a real cluster adds nothing, on real processes where the fixtures start one."""
import json
import textwrap

import pytest

from tests.unit.helpers import only_text

pytest_plugins = ["pytester"]

TINY = """name: {name}
cluster: {{shards: 1, copies: 2, workers: 1, model: mlp, replication: sync}}
workload: {{steps: {steps}}}
faults:
  - at: {{step: 10}}
    kind: kill
    target: replica(shard=0)
    until: {{step: 25}}
expect:
  checks: [no-lost-acks, single-primary, exactly-once, replicas-match]
  metrics: [{bound}]
"""
# why the tiny scenarios judge only the checks they name
SHORT = "a run of a few dozen steps: it ends before its first checkpoint, short of its target loss"


def scenario(pytester, name, steps=40, bound='"lost_acked_updates == 0"'):
    d = pytester.path / "scenarios"
    d.mkdir(exist_ok=True)
    (d / f"{name}.yaml").write_text(only_text(TINY.format(name=name, steps=steps, bound=bound), SHORT))


def test_collects_yaml_scenarios_as_items(pytester):
    scenario(pytester, "tiny-a")
    scenario(pytester, "tiny-b")
    (pytester.path / "scenarios" / "notes.yaml").write_text("just: data\n")   # not a scenario: ignored
    r = pytester.runpytest_subprocess("scenarios", "--collect-only", "-q")
    r.stdout.fnmatch_lines(["*tiny-a.yaml::tiny-a*", "*tiny-b.yaml::tiny-b*"])
    assert "notes" not in r.stdout.str()


def test_runs_and_passes_with_options(pytester):
    scenario(pytester, "tiny-pass")
    r = pytester.runpytest_subprocess("scenarios", "--pschaos-seed", "5", "--pschaos-backend", "sim",
                                      "--pschaos-out", str(pytester.path / "o"))
    r.assert_outcomes(passed=1)
    rep = json.loads((pytester.path / "o" / "tiny-pass-5" / "report.json").read_text())
    assert rep["seed"] == 5 and rep["backend"] == "sim"


def test_unprefixed_options_are_not_ours(pytester):
    """`--backend` and `--seed` belong to nobody here: another plugin or a user's conftest may
    define them. pytest refuses them as unknown."""
    scenario(pytester, "tiny-unprefixed")
    r = pytester.runpytest_subprocess("scenarios", "--backend", "sim")
    assert r.ret != 0
    r.stderr.fnmatch_lines(["*unrecognized arguments: --backend*"])


def test_a_conftest_implements_both_hooks(pytester):
    """pytest registers a conftest's hooks only by `pytest_` names: the scenario hook changes the
    scenario before it runs (its steps), the report hook sees every report, YAML and Python alike."""
    scenario(pytester, "tiny-hooked", steps=200)
    pytester.makeconftest(textwrap.dedent("""
        import json

        def pytest_pschaos_modify_scenario(scenario, config):
            scenario.workload.steps = 30

        def pytest_pschaos_report(report, item):
            with open("seen.jsonl", "a") as f:
                f.write(json.dumps({"item": item.name, "scenario": report["scenario"],
                                    "steps": report["scenario_spec"]["workload"]["steps"]}) + chr(10))
        """))
    pytester.makepyfile(test_py_hooked="""
        from pschaos.harness.run.scenario import Scenario

        def test_py_hooked(pschaos_run_scenario):
            sc = Scenario.model_validate({
                "name": "py-hooked", "cluster": {"shards": 1, "copies": 2, "workers": 1},
                "workload": {"steps": 20}, "faults": [], "expect": {"checks": ["exactly-once"]}})
            pschaos_run_scenario(sc.model_copy(update={"expect": sc.expect_only(
                ["exactly-once"], "twenty steps: no checkpoint, no target loss")}))
    """)
    r = pytester.runpytest_subprocess("scenarios", "test_py_hooked.py", "--pschaos-backend", "sim")
    r.assert_outcomes(passed=2)
    seen = [json.loads(line) for line in (pytester.path / "seen.jsonl").read_text().splitlines()]
    assert sorted(s["scenario"] for s in seen) == ["py-hooked", "tiny-hooked"]
    assert {s["scenario"]: s["steps"] for s in seen}["tiny-hooked"] == 30        # changed before it ran


def test_failure_shows_checks_and_rerun(pytester):
    scenario(pytester, "tiny-fail", bound='"failovers >= 3"')
    r = pytester.runpytest_subprocess("scenarios", "--pschaos-seed", "9", "--pschaos-backend", "sim")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*scenario tiny-fail (seed 9, sim): FAIL*", "*metric-bounds: False*",
                            "*rerun: pschaos run *tiny-fail.yaml --backend sim --seed 9*"])


def test_malformed_scenario_is_a_collection_error_with_line_and_field(pytester):
    d = pytester.path / "scenarios"
    d.mkdir()
    (d / "bad.yaml").write_text("name: bad\ncluster:\n  shards: many\n")
    r = pytester.runpytest_subprocess("scenarios")
    assert r.ret != 0
    r.stdout.fnmatch_lines(["*bad.yaml:3: cluster.shards*"])


def test_python_scenario_with_fixture_and_marker(pytester):
    pytester.makepyfile(test_py_scenario="""
        import pytest
        from pschaos.harness.run.scenario import Scenario

        @pytest.mark.pschaos(seed=11)
        def test_kill_replica(pschaos_run_scenario):
            sc = Scenario.model_validate({
                "name": "py-tiny", "cluster": {"shards": 1, "copies": 2, "workers": 1},
                "workload": {"steps": 30},
                "faults": [{"at": {"step": 5}, "kind": "kill", "target": "replica(shard=0)"}],
                "expect": {"checks": ["no-lost-acks", "exactly-once"]}})
            sc = sc.model_copy(update={"expect": sc.expect_only(["no-lost-acks", "exactly-once"],
                                                                "thirty steps: no checkpoint, no target loss")})
            rep = pschaos_run_scenario(sc)
            assert rep["seed"] == 11 and rep["verdict"] == "pass"

        def test_cluster_and_nemesis(pschaos_cluster, pschaos_nemesis, pschaos_history):
            be = pschaos_cluster(shards=1, copies=2, proxied=True)
            f = pschaos_nemesis.inject(be, "latency", "shard-0/0 -> shard-0/1", latency_ms=50)
            assert f.info["links"] == ["shard-0/0->shard-0/1"]
            pschaos_nemesis.heal(f)
            assert [e["f"] for e in pschaos_history.events()] == ["fault-start", "fault-stop"]
    """)
    r = pytester.runpytest_subprocess("test_py_scenario.py")
    r.assert_outcomes(passed=2)


@pytest.mark.long
def test_parallel_under_xdist(pytester):
    """`make test-long` only: test_scenarios_that_ask_for_the_same_fault_free_run_share_it_in_a_session
    runs two scenario items under `-n 2` in `make test`."""
    pytest.importorskip("xdist")
    scenario(pytester, "tiny-x1")
    scenario(pytester, "tiny-x2")
    r = pytester.runpytest_subprocess("scenarios", "-n", "2", "-p", "xdist", "--pschaos-backend", "sim")
    r.assert_outcomes(passed=2)


def test_scenarios_that_ask_for_the_same_fault_free_run_share_it_in_a_session(pytester):
    """converge-baseline runs the scenario without its faults first: two scenarios that differ only
    in their faults (and name) ask for the same run, made once per session unless asked not to."""
    for name, at in (("base-a", 10), ("base-b", 20)):     # 200 steps: the fault-free run passes converged
        text = TINY.format(name=name, steps=200, bound='"lost_acked_updates == 0"').replace("step: 10", f"step: {at}")
        (pytester.path / "scenarios").mkdir(exist_ok=True)
        (pytester.path / "scenarios" / f"{name}.yaml").write_text(
            only_text(text.replace("checks: [", "checks: [converge-baseline, "), SHORT))
    out = pytester.path / "o"
    r = pytester.runpytest_subprocess("scenarios", "--pschaos-backend", "sim", "--pschaos-out", str(out))
    r.assert_outcomes(passed=2)
    note = json.loads((out / "base-b-1" / "baseline" / "reused-from.json").read_text())
    assert note["made_in"] == str((out / "base-a-1" / "baseline").resolve())
    assert not (out / "base-a-1" / "baseline" / "reused-from.json").exists()
    a, b = (json.loads((out / n / "report.json").read_text()) for n in ("base-a-1", "base-b-1"))
    assert a["checks"]["converge-baseline"]["details"]["baseline_loss"] == \
        b["checks"]["converge-baseline"]["details"]["baseline_loss"]
    assert not (out / ".baselines").exists()       # the session's store went with it
    # under xdist: the workers share the controller's store; one of the two made the run
    r = pytester.runpytest_subprocess("scenarios", "--pschaos-backend", "sim", "--pschaos-out", str(out / "x"),
                                      "-n", "2")
    r.assert_outcomes(passed=2)
    assert len(list((out / "x").glob("base-*/baseline/reused-from.json"))) == 1
    r = pytester.runpytest_subprocess("scenarios", "--pschaos-backend", "sim", "--pschaos-out", str(out),
                                      "--pschaos-fresh-baselines")
    r.assert_outcomes(passed=2)
    assert not (out / "base-b-1" / "baseline" / "reused-from.json").exists()
