"""`pschaos report DIR...`: many runs (seeds, scenarios, backends) in one report.

Pass rate per scenario, per fault kind and per backend; flaky scenarios (both pass and fail
across seeds); failover time p50/p99 pooled across runs. Written as aggregate.json, report.html
and summary.md, like a single run.
"""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

import numpy as np

from . import svg
from .html import CSS

SCHEMA = "pschaos.aggregate/1"


def _pct(xs: list[float]) -> dict:
    if not xs:
        return {"p50": None, "p99": None, "n": 0}
    a = np.asarray(xs, dtype=float)
    return {"p50": round(float(np.percentile(a, 50)), 1), "p99": round(float(np.percentile(a, 99)), 1), "n": len(xs)}


def aggregate(reports: list[tuple[Path, dict]]) -> dict:
    scen: dict[str, dict] = {}
    kinds: dict[str, list[bool]] = {}
    backends: dict[str, list[bool]] = {}
    all_fo: list[float] = []
    for path, r in reports:
        ok = r.get("verdict") == "pass"
        s = scen.setdefault(r["scenario"], {"runs": 0, "passed": 0, "verdicts": {}, "failover_ms": [],
                                            "lost_acked_updates": 0, "failing_runs": []})
        s["runs"] += 1
        s["passed"] += ok
        s["verdicts"][str(r.get("seed"))] = r.get("verdict")
        fo = [f["ms"] for f in r.get("failover_times", []) if f.get("ms") is not None]
        s["failover_ms"] += fo
        all_fo += fo
        s["lost_acked_updates"] += r.get("metrics", {}).get("lost_acked_updates") or 0
        if not ok:
            s["failing_runs"].append({"dir": str(path.parent), "seed": r.get("seed"), "rerun": r.get("rerun")})
        for k in {f["kind"] for f in r.get("faults", [])} or {"none"}:
            kinds.setdefault(k, []).append(ok)
        backends.setdefault(r.get("backend", "?"), []).append(ok)
    out = {"schema": SCHEMA, "runs": len(reports), "passed": sum(s["passed"] for s in scen.values()),
           "scenarios": {}, "fault_kinds": {}, "backends": {}}
    out["pass_rate"] = round(out["passed"] / len(reports), 4) if reports else None
    for name, s in sorted(scen.items()):
        vs = set(s["verdicts"].values())
        out["scenarios"][name] = {"runs": s["runs"], "passed": s["passed"], "pass_rate": round(s["passed"] / s["runs"], 4),
                                  "flaky": "pass" in vs and len(vs) > 1, "verdicts": s["verdicts"],
                                  "failover_ms": _pct(s["failover_ms"]), "lost_acked_updates": s["lost_acked_updates"],
                                  "failing_runs": s["failing_runs"]}
    for k, oks in sorted(kinds.items()):
        out["fault_kinds"][k] = {"runs": len(oks), "pass_rate": round(sum(oks) / len(oks), 4)}
    for k, oks in sorted(backends.items()):
        out["backends"][k] = {"runs": len(oks), "pass_rate": round(sum(oks) / len(oks), 4)}
    out["flaky"] = sorted(n for n, s in out["scenarios"].items() if s["flaky"])
    out["failover_ms"] = _pct(all_fo)
    return out


def render_md(a: dict) -> str:
    lines = [f"### pschaos: {a['passed']}/{a['runs']} runs passed (pass rate {a['pass_rate']})", ""]
    if a["flaky"]:
        lines += [f"Flaky (pass and fail across seeds): {', '.join(a['flaky'])}", ""]
    lines += ["| scenario | runs | pass rate | flaky | failover p50 / p99 ms |", "|---|---|---|---|---|"]
    for n, s in a["scenarios"].items():
        fo = s["failover_ms"]
        lines.append(f"| {n} | {s['runs']} | {s['pass_rate']} | {'yes' if s['flaky'] else ''} | "
                     f"{fo['p50']} / {fo['p99']} |")
    lines += ["", "| fault kind | runs | pass rate |", "|---|---|---|"]
    lines += [f"| {k} | {v['runs']} | {v['pass_rate']} |" for k, v in a["fault_kinds"].items()]
    return "\n".join(lines) + "\n"


def render_html(a: dict) -> str:
    rows = "".join(
        f"<tr><td>{escape(n)}</td><td>{s['runs']}</td><td>{s['pass_rate']}</td>"
        f"<td class=\"{'fail' if s['flaky'] else ''}\">{'flaky' if s['flaky'] else ''}</td>"
        f"<td>{s['failover_ms']['p50']} / {s['failover_ms']['p99']}</td>"
        f"<td>{'<br>'.join('<code>' + escape(f['rerun'] or '') + '</code>' for f in s['failing_runs'])}</td></tr>"
        for n, s in a["scenarios"].items())
    plots = [svg.bars("pass rate per scenario", [(n, {"pass rate": s["pass_rate"]}) for n, s in a["scenarios"].items()],
                      ylabel="pass rate"),
             svg.bars("pass rate per fault kind", [(k, {"pass rate": v["pass_rate"]}) for k, v in a["fault_kinds"].items()],
                      ylabel="pass rate"),
             svg.bars("failover ms per scenario (p50, p99)",
                      [(n, {"p50": s["failover_ms"]["p50"] or 0, "p99": s["failover_ms"]["p99"] or 0})
                       for n, s in a["scenarios"].items() if s["failover_ms"]["n"]], ylabel="ms")]
    cls = "pass" if a["pass_rate"] == 1 else "fail"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pschaos: {a['passed']}/{a['runs']} passed</title>
<style>{CSS}</style></head><body>
<h1>pschaos runs: <span class="{cls}">{a['passed']}/{a['runs']} passed</span></h1>
<p>pass rate {a['pass_rate']} · flaky: {escape(', '.join(a['flaky']) or 'none')} · failover p50
{a['failover_ms']['p50']} ms, p99 {a['failover_ms']['p99']} ms over {a['failover_ms']['n']} failovers</p>
<h2>Pass rate per scenario</h2>{plots[0]}
<h2>Pass rate per fault kind</h2>{plots[1]}
<h2>Failover time</h2>{plots[2]}
<h2>Scenarios</h2><table><tr><th>scenario</th><th>runs</th><th>pass rate</th><th></th><th>failover p50 / p99 ms</th>
<th>rerun failing runs</th></tr>{rows}</table>
</body></html>
"""


def write(a: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "aggregate.json").write_text(json.dumps(a, indent=2))
    (out_dir / "report.html").write_text(render_html(a))
    (out_dir / "summary.md").write_text(render_md(a))
