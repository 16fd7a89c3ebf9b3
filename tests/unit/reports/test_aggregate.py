"""Aggregation across runs: pass rates per scenario and fault kind, flaky scenarios, failover pooled."""
from pathlib import Path

from pschaos.reports.aggregate import aggregate, render_html, render_md


def rep(scenario, seed, verdict, kinds=("kill",), ms=(480.0,), backend="process", root=Path("/runs")):
    return (root / f"{scenario}-{seed}" / "report.json",
            {"scenario": scenario, "seed": seed, "verdict": verdict, "backend": backend,
             "rerun": f"pschaos run scenarios/{scenario}.yaml --seed {seed}",
             "faults": [{"kind": k, "target": "x", "start_s": 0, "end_s": 1} for k in kinds],
             "failover_times": [{"ms": m} for m in ms], "metrics": {"lost_acked_updates": 0}})


def test_pass_rates_flaky_and_failover(tmp_path):
    runs = [rep("kill-primary", 1, "pass", root=tmp_path), rep("kill-primary", 2, "fail", ms=(900.0,), root=tmp_path),
            rep("loss", 1, "pass", kinds=("loss",), ms=(), root=tmp_path),
            rep("loss", 2, "pass", kinds=("loss",), ms=(), root=tmp_path)]
    for path, _ in runs[1:]:                     # the first run crashed before it wrote its page
        path.parent.mkdir()
        (path.parent / "report.html").write_text("<!doctype html>")
    a = aggregate(runs)
    assert a["runs"] == 4 and a["passed"] == 3 and a["pass_rate"] == 0.75
    assert a["flaky"] == ["kill-primary"]
    kp = a["scenarios"]["kill-primary"]
    assert kp["pass_rate"] == 0.5 and kp["failover_ms"]["n"] == 2 and kp["failover_ms"]["p50"] == 900.0      # nearest rank, as the run's metrics
    assert kp["failing_runs"][0]["rerun"].endswith("--seed 2")
    assert a["fault_kinds"] == {"kill": {"runs": 2, "pass_rate": 0.5, "pass": 1, "fail": 1, "unknown": 0},
                                "loss": {"runs": 2, "pass_rate": 1.0, "pass": 2, "fail": 0, "unknown": 0}}
    assert a["scenarios"]["loss"]["flaky"] is False
    md, html = render_md(a), render_html(a, tmp_path / "agg")
    assert "Flaky (both pass and fail among their runs): kill-primary" in md and "| loss | 2 | 100% |" in md
    assert "(pass rate 75%)" in md and "| kill | 2 | 50% |" in md
    assert html.count('<svg class="plot') == 4 and "--seed 2" in html
    assert "None" not in html and "None" not in md and "| – / – |" in md                   # loss had no failover
    assert html.count('href="../kill-primary-') == 1 and 'href="../loss-2/report.html"' in html
    assert a["run_list"][0]["report"] is None and html.count(">report</a>") == 3


def test_distributions_behind_the_numbers():
    runs = [rep("kill-primary", s, "pass", ms=(400.0 + 10 * s, 900.0)) for s in range(1, 5)]
    runs[1][1]["failover_times"].append({"ms": None})                  # one never completed
    runs.append(rep("kill-primary", 9, "unknown", ms=()))
    runs[0][1]["metrics"]["lost_acked_updates"] = 3
    a = aggregate(runs)
    kp = a["scenarios"]["kill-primary"]
    assert kp["failover_ms"]["p99"] == "inf" and kp["failover_ms"]["p50"] == 900.0   # nearest rank, +inf counted
    assert [r["failover_ms_max"] for r in a["run_list"]] == [900.0, "inf", 900.0, 900.0, None]
    assert kp["failover_ms_values"] == sorted([410.0, 420.0, 430.0, 440.0] + [900.0] * 4)
    assert [(r["seed"], r["lost"]) for r in kp["lost_by_run"]] == [(1, 3), (2, 0), (3, 0), (4, 0), (9, 0)]
    assert kp["verdict_counts"] == {"pass": 4, "fail": 0, "unknown": 1} and kp["failover_failed"] == 1
    assert [r["seed"] for r in a["run_list"]] == [1, 2, 3, 4, 9] and a["simulated_runs"] == 0
    html = render_html(a)
    assert "seeds 1: 3" in html and "1 never completed · p50" in html and "80% of 5 runs" in html


def test_simulated_runs_say_so_on_every_plot():
    sim = [rep("kill-primary", s, "pass", backend="sim") for s in (1, 2)]
    real = [rep("kill-primary", 3, "pass")]
    every = render_html(aggregate(sim))
    assert every.count('<svg class="plot') == every.count("simulated · virtual time</text>") == 4
    mixed = render_html(aggregate(sim + real))
    assert mixed.count("2 of 3 runs simulated (virtual time)</text>") == 4
    assert "simulated" not in render_html(aggregate(real))


def test_every_run_counts_also_a_seed_run_twice():
    """`soak --repeat` and one seed on two backends are separate runs, each with its own dot."""
    runs = [rep("kp", 1, "pass"), rep("kp", 1, "fail"), rep("kp", 1, "pass", backend="sim"), rep("kp", 10, "pass"),
            rep("kp", 2, "pass")]
    runs[1][1]["metrics"]["lost_acked_updates"] = 7
    a = aggregate(runs)
    kp = a["scenarios"]["kp"]
    assert [(r["seed"], r["backend"], r["repeat"], r["lost"]) for r in kp["lost_by_run"]][:3] == \
        [(1, "process", 1, 0), (1, "process", 2, 7), (1, "sim", 1, 0)]
    assert kp["flaky"] and a["flaky"] == ["kp"]
    assert [(r["seed"], r["backend"], r["repeat"]) for r in a["run_list"]] == \
        [(1, "process", 1), (1, "process", 2), (1, "sim", 1), (2, "process", 1), (10, "process", 1)]
    html = render_html(a)
    assert "seeds 1 process #2: 7" in html and html.count("<circle") == 5


def test_pooled_failover_percentiles_agree_with_the_run_metrics():
    from pschaos.harness.run.metrics import failover_stats

    from pschaos.reports.percentiles import failover_stats as ours

    assert ours is failover_stats                  # one rule: the run's metrics read the reports' copy
    assert ours([float(x) for x in range(1, 101)] + [None])["p99"] == 100.0     # nearest rank, not interpolated
    runs = [rep("kp", 1, "pass", ms=(100.0, 200.0)), rep("kp", 2, "fail", ms=())]
    assert aggregate(runs)["failover_ms"]["p99"] == 200.0
    runs[1][1]["failover_times"] = [{"ms": None}]                      # one never completed: not dropped
    a = aggregate(runs)
    assert a["failover_ms"] == a["scenarios"]["kp"]["failover_ms"] == failover_stats([100.0, 200.0, None])
    assert a["failover_ms"]["p99"] == "inf"


def test_names_with_table_characters_cannot_break_a_page_or_a_table():
    runs = [rep("a|b\nc", "<b>7</b>", "fail", kinds=("kill|x",))]
    runs[0][1]["metrics"]["lost_acked_updates"] = float("nan")
    a = aggregate(runs)
    md, html = render_md(a), render_html(a)
    assert "| a\\|b c |" in md and "| kill\\|x |" in md
    assert all(line.count("|") - line.count("\\|") in (0, 4, 6) for line in md.splitlines())
    assert "<b>7</b>" not in html and "&lt;b&gt;7&lt;/b&gt;" in html and "nan" not in html.lower()


def test_runs_sort_by_seed_as_a_number():
    a = aggregate([rep("kp", s, "pass") for s in (10, 2, 1)])
    assert [r["seed"] for r in a["run_list"]] == [1, 2, 10]


def test_a_total_with_a_run_that_has_no_figure_is_unknown_not_0():
    """A run that could not judge lost acks or spurious failovers (None) makes its scenario's total
    None, said as such, never the 0 of the runs that could (a pass-looking figure)."""
    runs = [rep("kp", 1, "pass"), rep("kp", 2, "unknown"), rep("lat", 1, "pass", kinds=("latency",))]
    runs[0][1]["metrics"]["spurious_failovers"] = 0
    runs[1][1]["metrics"].update(lost_acked_updates=None, spurious_failovers=None)
    runs[2][1]["metrics"]["spurious_failovers"] = 2
    a = aggregate(runs)
    kp, lat = a["scenarios"]["kp"], a["scenarios"]["lat"]
    assert (kp["lost_acked_updates"], kp["lost_without_figure"]) == (None, 1)
    assert (kp["spurious_failovers"], kp["spurious_without_figure"]) == (None, 1)
    assert (lat["lost_acked_updates"], lat["spurious_failovers"], lat["spurious_without_figure"]) == (0, 2, 0)
    assert "unknown: 1 run(s) without a figure" in render_html(a)
    runs[1][1]["metrics"].update(lost_acked_updates=3, spurious_failovers=1)
    kp = aggregate(runs)["scenarios"]["kp"]
    assert (kp["lost_acked_updates"], kp["spurious_failovers"], kp["lost_without_figure"]) == (3, 1, 0)
