"""The aggregate's report.html: how many runs passed, and the distributions behind the numbers.

Pass rate per scenario and per fault kind as horizontal stacked bars (pass / fail / unknown,
with the run count beside each, so `100%` of 1 run does not read like 100% of 50); failover
time as one ECDF per scenario with p50 and p99 marked; lost acknowledged updates per run as
dots (a seed run twice is two dots); a table of scenarios and one of runs, each run linking to its own report.
"""
from __future__ import annotations

import math
import os
from html import escape
from pathlib import Path

from pschaos.reports import dist_svg, svg, ticks
from pschaos.reports.html import CSS
from pschaos.reports.ticks import maybe
from pschaos.reports.totals import unknown_total


def badge(a: dict) -> str:
    """Every plot says when its numbers come from the simulator (virtual time)."""
    sim, n = a.get("simulated_runs", 0), a["runs"]
    if not sim:
        return ""
    return "simulated · virtual time" if sim == n else f"{sim} of {n} runs simulated (virtual time)"


def _share_rows(groups: dict[str, dict]) -> list[tuple[str, dict[str, float], str]]:
    rows = []
    for name, g in groups.items():
        n = g["runs"]
        counts = g.get("verdict_counts", g)
        shares = {k: counts.get(k, 0) / n for k in ("pass", "fail", "unknown") if counts.get(k)}
        rows.append((name, shares, f"{ticks.percent(g['pass_rate'])} of {n} run{'s' if n != 1 else ''}"))
    return rows


def _mark(v) -> float | None:
    """A percentile as a number to mark: "inf" (it landed on a failover that never completed) is +inf."""
    return float("inf") if v == "inf" else v


def _failover_rows(a: dict) -> list[dist_svg.Row]:
    rows = []
    for name, s in a["scenarios"].items():
        vs, fo, failed = s.get("failover_ms_values", []), s["failover_ms"], s.get("failover_failed", 0)
        if vs or failed:
            # what a clipped note must not lose comes first: how many never completed
            parts = [f"{failed} never completed"] if failed else []
            parts += [f"p50 {maybe(fo['p50'], ticks.millis)}", f"p99 {maybe(fo['p99'], ticks.millis)}",
                      f"n {len(vs) + failed}"]
            # a failover that never completed is +inf: the step line stops short of 100%
            rows.append((name, vs + [math.inf] * failed, {"p50": _mark(fo["p50"]), "p99": _mark(fo["p99"])},
                         " · ".join(parts)))
    return rows


def run_name(run: dict, runs: list[dict]) -> str:
    """`seed 3`, with the backend when the scenario ran on several, and `#2` for a seed's second run."""
    several = len({r.get("backend") for r in runs}) > 1
    name = f"seed {run.get('seed')}" + (f" {run.get('backend')}" if several else "")
    return name + (f" #{run['repeat']}" if run.get("repeat", 1) > 1 else "")


def _lost_rows(a: dict) -> list[dist_svg.Row]:
    rows = []
    for name, s in a["scenarios"].items():
        runs = s.get("lost_by_run", [])
        by_run = {run_name(r, runs): r["lost"] for r in runs
                  if isinstance(r["lost"], (int, float)) and math.isfinite(r["lost"])}
        bad = [f"{k[5:]}: {ticks.count(v)}" for k, v in by_run.items() if v > 0]
        note = (f"seeds {', '.join(bad)}" if bad else f"0 in {len(by_run)} run{'s' if len(by_run) != 1 else ''}") \
            if by_run else f"no count ({ticks.DASH})"
        rows.append((name, list(by_run.values()), by_run, note))
    return rows


def _link(report: str | None, out_dir: Path | None) -> str:
    """The run's own report, relative to this page when both sit on one tree (a copied folder keeps working)."""
    if report is None:
        return ticks.DASH
    try:
        href = os.path.relpath(report, out_dir) if out_dir is not None else Path(report).as_uri()
    except ValueError:
        href = Path(report).as_uri()
    return f'<a href="{escape(href)}">report</a>'


def _em(value, fmt: ticks.Formatter) -> str:
    """A table cell's value in its unit, escaped for HTML."""
    return escape(maybe(value, fmt))


def _total(s: dict, key: str, without: str) -> str:
    """A scenario's total, or why it has none (runs without a figure: reports/aggregate.py)."""
    if s.get(key) is None and s.get(without):
        return escape(unknown_total(s[without]))
    return _em(s.get(key), ticks.count)


def _run_tr(r: dict, out_dir: Path | None) -> str:
    """One run's row: its seed (and `#2` for a seed's second run), verdict, figures, report link."""
    again = f" #{r['repeat']}" if r.get("repeat", 1) > 1 else ""
    verdict = escape(str(r["verdict"]))
    return (f"<tr><td>{escape(r['scenario'])}</td><td>{escape(str(r['seed']) + again)}</td>"
            f"<td>{escape(str(r['backend']))}</td><td class=\"{verdict}\">{verdict}</td>"
            f"<td>{_em(r['lost_acked_updates'], ticks.count)}</td><td>{_em(r['failovers'], ticks.count)}</td>"
            f"<td>{_em(r['failover_ms_max'], ticks.millis)}</td><td>{_em(r.get('ettr'), ticks.percent)}</td>"
            f"<td>{_link(r['report'], out_dir)}</td></tr>")


def render(a: dict, out_dir: Path | None = None) -> str:
    b = badge(a)
    unit = "virtual time, " if b else ""
    scen_rows = "".join(
        f"<tr><td>{escape(n)}</td><td>{s['runs']}</td><td>{escape(ticks.percent(s['pass_rate']))}</td>"
        f"<td class=\"{'fail' if s['flaky'] else ''}\">{'flaky' if s['flaky'] else ''}</td>"
        f"<td>{_em(s['failover_ms']['p50'], ticks.millis)} / {_em(s['failover_ms']['p99'], ticks.millis)}</td>"
        f"<td>{_total(s, 'lost_acked_updates', 'lost_without_figure')}</td>"
        f"<td>{_em(s.get('ettr_min'), ticks.percent)}</td>"
        f"<td>{'<br>'.join('<code>' + escape(f['rerun'] or ticks.DASH) + '</code>' for f in s['failing_runs'])}</td></tr>"
        for n, s in a["scenarios"].items())
    run_rows = "".join(_run_tr(r, out_dir) for r in a.get("run_list", []))
    plots = [
        ("Pass rate per scenario", svg.hbars("pass rate per scenario (pass, fail, unknown)",
                                             _share_rows(a["scenarios"]), xfmt=ticks.percent, stacked=True,
                                             domain=(0.0, 1.0), badge=b)),
        ("Pass rate per fault kind", svg.hbars("pass rate per fault kind (pass, fail, unknown)",
                                               _share_rows(a["fault_kinds"]), xfmt=ticks.percent, stacked=True,
                                               domain=(0.0, 1.0), badge=b)),
        ("Failover time per scenario", dist_svg.rows(
            "failover time per scenario: cumulative share of failovers (ECDF), p50 and p99 marked",
            _failover_rows(a), "ecdf", ticks.millis, f"from the fault to the first ack at the new epoch ({unit}pooled "
            "over seeds)", b)),
        ("Lost acknowledged updates per run", dist_svg.rows(
            "lost acknowledged updates, a dot per run", _lost_rows(a), "dots", ticks.count,
            "lost acknowledged updates in one run", b)),
    ]
    fo = a["failover_ms"]
    cls = "pass" if a["pass_rate"] == 1 else "fail"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pschaos: {a['passed']}/{a['runs']} passed</title>
<style>{CSS}</style></head><body>
<h1>pschaos runs: <span class="{cls}">{a['passed']}/{a['runs']} passed</span></h1>
<p>pass rate {_em(a['pass_rate'], ticks.percent)} · flaky: {escape(', '.join(a['flaky']) or 'none')} · failover p50
{_em(fo['p50'], ticks.millis)}, p99 {_em(fo['p99'], ticks.millis)} over {fo['n']} failovers
{f'· <strong>{escape(b)}</strong>' if b else ''}</p>
{''.join(f'<h2>{escape(t)}</h2>{p}' for t, p in plots)}
<h2>Scenarios</h2><table><tr><th>scenario</th><th>runs</th><th>pass rate</th><th></th><th>failover p50 / p99</th>
<th>lost acks</th><th>lowest ETTR</th><th>rerun failing runs</th></tr>{scen_rows}</table>
<h2>Runs</h2><table><tr><th>scenario</th><th>seed</th><th>backend</th><th>verdict</th><th>lost acks</th>
<th>failovers</th><th>slowest failover</th><th>ETTR</th><th></th></tr>{run_rows}</table>
</body></html>
"""
