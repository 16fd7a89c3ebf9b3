"""`pschaos report DIR...`: many runs (seeds, scenarios, backends) in one report.

Pass rate per scenario, per fault kind and per backend; flaky scenarios (both pass and fail
across their runs); failover time p50/p99 pooled across runs, a failover that never completed
counted as +inf as the run's own metrics count it, and the values behind them (the HTML draws
their distributions); lost acknowledged updates per run (a seed run twice, by `soak --repeat` or
on two backends, is two runs); one row per run with the path of its own report. Written as
aggregate.json, report.html (`aggregate_html`) and summary.md.

A scenario's total of lost acknowledged updates or spurious failovers is None when any of its
runs has no figure (the run could not judge it): a 0 added up over the runs that could would
read as a pass, so the total says unknown and `*_without_figure` says how many runs lack one.
"""
from __future__ import annotations

import json
from pathlib import Path

from pschaos.reports.aggregate_html import render as render_html
from pschaos.reports.markdown import cell
from pschaos.reports.percentiles import failover_stats
from pschaos.reports.ticks import maybe, millis, percent
from pschaos.reports.totals import total, without

SCHEMA = "pschaos.aggregate/1"


def _seed_order(seed) -> tuple:
    """Seeds sort as numbers (2 before 10); anything else after them, as text."""
    return (0, int(seed), "") if isinstance(seed, int) or str(seed).isdigit() else (1, 0, str(seed))


def aggregate(reports: list[tuple[Path, dict]]) -> dict:
    scen: dict[str, dict] = {}
    kinds: dict[str, list[str]] = {}           # fault kind -> the verdicts of the runs it was in
    backends: dict[str, list[str]] = {}
    all_fo: list[float | None] = []
    run_rows: list[dict] = []
    for path, r in reports:
        ok = r.get("verdict") == "pass"
        s = scen.setdefault(r["scenario"], {"runs": 0, "passed": 0, "failover_ms": [], "lost": [],
                                            "failing_runs": [], "lost_by_run": [], "all": [], "spurious": [],
                                            "ettr": []})
        s["runs"] += 1
        s["passed"] += ok
        s["all"].append(r.get("verdict"))           # every run, also two of one seed (a baseline, a --repeat)
        fo = [f.get("ms") for f in r.get("failover_times", [])]        # None: never completed
        s["failover_ms"] += fo
        all_fo += fo
        lost = r.get("metrics", {}).get("lost_acked_updates")
        s["lost"].append(lost)
        s["spurious"].append(r.get("metrics", {}).get("spurious_failovers"))
        s["ettr"].append(r.get("metrics", {}).get("ettr"))
        repeat = 1 + sum(1 for x in s["lost_by_run"] if (x["seed"], x["backend"]) == (r.get("seed"), r.get("backend")))
        s["lost_by_run"].append({"seed": r.get("seed"), "backend": r.get("backend"), "repeat": repeat, "lost": lost})
        run_rows.append(_run_row(path, r, fo, repeat))
        if not ok:
            s["failing_runs"].append({"dir": str(path.parent), "seed": r.get("seed"), "rerun": r.get("rerun")})
        for k in {f["kind"] for f in r.get("faults", [])} or {"none"}:
            kinds.setdefault(k, []).append(r.get("verdict"))
        backends.setdefault(r.get("backend", "?"), []).append(r.get("verdict"))
    out = {"schema": SCHEMA, "runs": len(reports), "passed": sum(s["passed"] for s in scen.values()),
           "scenarios": {}, "fault_kinds": {}, "backends": {}}
    out["pass_rate"] = round(out["passed"] / len(reports), 4) if reports else None
    for name, s in sorted(scen.items()):
        done = sorted(x for x in s["failover_ms"] if x is not None)
        out["scenarios"][name] = {"runs": s["runs"], "passed": s["passed"], "pass_rate": round(s["passed"] / s["runs"], 4),
                                  "flaky": "pass" in s["all"] and len(set(s["all"])) > 1,
                                  "failover_ms": failover_stats(s["failover_ms"]), "failover_ms_values": done,
                                  "failover_failed": len(s["failover_ms"]) - len(done),
                                  "lost_acked_updates": total(s["lost"]), "lost_without_figure": without(s["lost"]),
                                  "lost_by_run": s["lost_by_run"],
                                  "spurious_failovers": total(s["spurious"]),
                                  "spurious_without_figure": without(s["spurious"]),
                                  # the worst run's effective training time ratio (None: no run had one)
                                  "ettr_min": min((x for x in s["ettr"] if x is not None), default=None),
                                  "verdict_counts": _counts(s["all"]), "failing_runs": s["failing_runs"]}
    for k, vs in sorted(kinds.items()):
        out["fault_kinds"][k] = _rate(vs)
    for k, vs in sorted(backends.items()):
        out["backends"][k] = _rate(vs)
    out["flaky"] = sorted(n for n, s in out["scenarios"].items() if s["flaky"])
    out["failover_ms"] = failover_stats(all_fo)
    out["simulated_runs"] = sum(1 for _, r in reports if r.get("simulated") or r.get("backend") == "sim")
    out["run_list"] = sorted(run_rows, key=lambda x: (x["scenario"], _seed_order(x["seed"]), str(x["backend"]),
                                                      x["repeat"]))
    return out


def _counts(verdicts) -> dict[str, int]:
    """How many runs passed, failed, were unknown (anything not pass or fail is unknown)."""
    vs = list(verdicts)
    c = {"pass": vs.count("pass"), "fail": vs.count("fail")}
    return c | {"unknown": len(vs) - c["pass"] - c["fail"]}


def _rate(verdicts: list) -> dict:
    return {"runs": len(verdicts), "pass_rate": round(verdicts.count("pass") / len(verdicts), 4)} | _counts(verdicts)


def _run_row(path: Path, r: dict, fo: list[float | None], repeat: int) -> dict:
    m = r.get("metrics", {})
    return {"scenario": r["scenario"], "seed": r.get("seed"), "backend": r.get("backend"), "repeat": repeat,
            "verdict": r.get("verdict"), "lost_acked_updates": m.get("lost_acked_updates"),
            "failovers": m.get("failovers"), "spurious_failovers": m.get("spurious_failovers"),
            "failover_ms_max": failover_stats(fo)["max"],   # "inf": one never completed
            "ettr": m.get("ettr"), "goodput": m.get("goodput"),
            "report": str(page) if (page := path.parent / "report.html").is_file() else None}   # none: a run that crashed


def render_md(a: dict) -> str:
    lines = [f"### pschaos: {a['passed']}/{a['runs']} runs passed (pass rate {maybe(a['pass_rate'], percent)})", ""]
    if a["flaky"]:
        lines += [f"Flaky (both pass and fail among their runs): {', '.join(cell(n) for n in a['flaky'])}", ""]
    lines += ["| scenario | runs | pass rate | flaky | failover p50 / p99 |", "|---|---|---|---|---|"]
    for n, s in a["scenarios"].items():
        fo = s["failover_ms"]
        lines.append(f"| {cell(n)} | {s['runs']} | {percent(s['pass_rate'])} | {'yes' if s['flaky'] else ''} | "
                     f"{maybe(fo['p50'], millis)} / {maybe(fo['p99'], millis)} |")
    lines += ["", "| fault kind | runs | pass rate |", "|---|---|---|"]
    lines += [f"| {cell(k)} | {v['runs']} | {percent(v['pass_rate'])} |" for k, v in a["fault_kinds"].items()]
    return "\n".join(lines) + "\n"


def write(a: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "aggregate.json").write_text(json.dumps(a, indent=2))
    (out_dir / "report.html").write_text(render_html(a, out_dir))
    (out_dir / "summary.md").write_text(render_md(a))
