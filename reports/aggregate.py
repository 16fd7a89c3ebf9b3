"""`pschaos report DIR...`: many runs (seeds, scenarios, backends) in one report.

Pass rate per scenario, per fault kind and per backend; flaky scenarios (both pass and fail
across seeds); failover time p50/p99 pooled across runs, and the values behind them (the HTML
draws their distributions); lost acknowledged updates per seed; one row per run with the path
of its own report. Written as aggregate.json, report.html (`aggregate_html`) and summary.md.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .aggregate_html import render as render_html
from .ticks import maybe, millis

SCHEMA = "pschaos.aggregate/1"



def _pct(xs: list[float]) -> dict:
    if not xs:
        return {"p50": None, "p99": None, "n": 0}
    a = np.asarray(xs, dtype=float)
    return {"p50": round(float(np.percentile(a, 50)), 1), "p99": round(float(np.percentile(a, 99)), 1), "n": len(xs)}


def aggregate(reports: list[tuple[Path, dict]]) -> dict:
    scen: dict[str, dict] = {}
    kinds: dict[str, list[str]] = {}           # fault kind -> the verdicts of the runs it was in
    backends: dict[str, list[str]] = {}
    all_fo: list[float] = []
    run_rows: list[dict] = []
    for path, r in reports:
        ok = r.get("verdict") == "pass"
        s = scen.setdefault(r["scenario"], {"runs": 0, "passed": 0, "verdicts": {}, "failover_ms": [],
                                            "lost_acked_updates": 0, "failing_runs": [], "lost_by_seed": {}, "all": []})
        s["runs"] += 1
        s["passed"] += ok
        s["verdicts"][str(r.get("seed"))] = r.get("verdict")
        s["all"].append(r.get("verdict"))           # every run, also two of one seed (a baseline, a --repeat)
        fo = [f["ms"] for f in r.get("failover_times", []) if f.get("ms") is not None]
        s["failover_failed"] = s.get("failover_failed", 0) + sum(1 for f in r.get("failover_times", [])
                                                                 if f.get("ms") is None)
        s["failover_ms"] += fo
        all_fo += fo
        lost = r.get("metrics", {}).get("lost_acked_updates")
        s["lost_acked_updates"] += lost or 0
        s["lost_by_seed"][str(r.get("seed"))] = lost
        run_rows.append(_run_row(path, r, fo))
        if not ok:
            s["failing_runs"].append({"dir": str(path.parent), "seed": r.get("seed"), "rerun": r.get("rerun")})
        for k in {f["kind"] for f in r.get("faults", [])} or {"none"}:
            kinds.setdefault(k, []).append(r.get("verdict"))
        backends.setdefault(r.get("backend", "?"), []).append(r.get("verdict"))
    out = {"schema": SCHEMA, "runs": len(reports), "passed": sum(s["passed"] for s in scen.values()),
           "scenarios": {}, "fault_kinds": {}, "backends": {}}
    out["pass_rate"] = round(out["passed"] / len(reports), 4) if reports else None
    for name, s in sorted(scen.items()):
        vs = set(s["verdicts"].values())
        out["scenarios"][name] = {"runs": s["runs"], "passed": s["passed"], "pass_rate": round(s["passed"] / s["runs"], 4),
                                  "flaky": "pass" in vs and len(vs) > 1, "verdicts": s["verdicts"],
                                  "failover_ms": _pct(s["failover_ms"]), "failover_ms_values": sorted(s["failover_ms"]),
                                  "failover_failed": s.get("failover_failed", 0),
                                  "lost_acked_updates": s["lost_acked_updates"], "lost_by_seed": s["lost_by_seed"],
                                  "verdict_counts": _counts(s["all"]), "failing_runs": s["failing_runs"]}
    for k, vs in sorted(kinds.items()):
        out["fault_kinds"][k] = _rate(vs)
    for k, vs in sorted(backends.items()):
        out["backends"][k] = _rate(vs)
    out["flaky"] = sorted(n for n, s in out["scenarios"].items() if s["flaky"])
    out["failover_ms"] = _pct(all_fo)
    out["simulated_runs"] = sum(1 for _, r in reports if r.get("simulated") or r.get("backend") == "sim")
    out["run_list"] = sorted(run_rows, key=lambda x: (x["scenario"], str(x["seed"])))
    return out


def _counts(verdicts) -> dict[str, int]:
    """How many runs passed, failed, were unknown (anything not pass or fail is unknown)."""
    vs = list(verdicts)
    c = {"pass": vs.count("pass"), "fail": vs.count("fail")}
    return c | {"unknown": len(vs) - c["pass"] - c["fail"]}


def _rate(verdicts: list) -> dict:
    return {"runs": len(verdicts), "pass_rate": round(verdicts.count("pass") / len(verdicts), 4)} | _counts(verdicts)


def _run_row(path: Path, r: dict, fo: list[float]) -> dict:
    m = r.get("metrics", {})
    return {"scenario": r["scenario"], "seed": r.get("seed"), "backend": r.get("backend"), "verdict": r.get("verdict"),
            "lost_acked_updates": m.get("lost_acked_updates"), "failovers": m.get("failovers"),
            "failover_ms_max": max(fo) if fo else None,
            "report": str(page) if (page := path.parent / "report.html").is_file() else None}   # none: a run that crashed


def render_md(a: dict) -> str:
    lines = [f"### pschaos: {a['passed']}/{a['runs']} runs passed (pass rate {a['pass_rate']})", ""]
    if a["flaky"]:
        lines += [f"Flaky (pass and fail across seeds): {', '.join(a['flaky'])}", ""]
    lines += ["| scenario | runs | pass rate | flaky | failover p50 / p99 |", "|---|---|---|---|---|"]
    for n, s in a["scenarios"].items():
        fo = s["failover_ms"]
        lines.append(f"| {n} | {s['runs']} | {s['pass_rate']} | {'yes' if s['flaky'] else ''} | "
                     f"{maybe(fo['p50'], millis)} / {maybe(fo['p99'], millis)} |")
    lines += ["", "| fault kind | runs | pass rate |", "|---|---|---|"]
    lines += [f"| {k} | {v['runs']} | {v['pass_rate']} |" for k, v in a["fault_kinds"].items()]
    return "\n".join(lines) + "\n"


def write(a: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "aggregate.json").write_text(json.dumps(a, indent=2))
    (out_dir / "report.html").write_text(render_html(a, out_dir))
    (out_dir / "summary.md").write_text(render_md(a))
