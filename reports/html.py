"""report.html: one self-contained page (inline SVG and CSS, no scripts, no network).

At the top the verdict and the rerun command; then the timeline (a lane per node and worker,
zoomable, with links from a failing check's evidence to the moment it names), training loss over time with every fault
window shaded and labelled, who was primary of each shard in which epoch, the failover time
distribution, replication lag and catch-up bytes (incremental against snapshot), throughput over
time, the checks with their evidence, and the scenario as run.
"""
from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path

import yaml

from pschaos.reports import evidence, svg, ticks, timeline, timeline_svg
from pschaos.reports.evidence import Moment

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:820px;color:#111}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd}
.pass{color:#15803d}.fail{color:#b91c1c}.unknown{color:#a16207}
code,pre{font:12px ui-monospace,monospace;background:#f4f4f5;padding:2px 4px;border-radius:3px}
pre{padding:8px;overflow:auto;max-height:320px}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;vertical-align:top}
svg.plot{width:100%;height:auto;background:#fff;border:1px solid #eee}
.tick{font-size:10px;fill:#555}.label{font-size:11px;fill:#333}.legend{font-size:11px}
.grid{stroke:#f1f1f1}.axis{stroke:#999}.fault{fill:#fecaca;opacity:.55}.flabel{font-size:10px;fill:#991b1b}
.barlabel{font-size:10px;fill:#fff}.stripe{fill:#fafafa}.badge{font-size:11px;fill:#7c3aed;font-weight:600}
ul.moments{margin:0 0 4px;padding-left:18px;font-size:12px}
"""


def _simulated(report: dict) -> str:
    """A simulated run says so, and names the calibration its timings come from."""
    sim = report.get("simulated")
    if not sim:
        return ""
    return (f"<p><strong>simulated</strong> in virtual time (SimPy twin); timings from calibration "
            f"<code>{escape(str(sim.get('calibration')))}</code></p>")


def _verdict_class(v) -> str:
    return {True: "pass", False: "fail", "pass": "pass", "fail": "fail"}.get(v, "unknown")


def loss_series(history: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """Each worker's training loss; a train-step without a numeric loss (another system's
    workload, an older history) is left out, never a crash of the page."""
    out: dict[str, list[tuple[float, float]]] = {}
    for e in history:
        v = e.get("value") or {}
        if e.get("f") == "train-step" and isinstance(v.get("loss"), (int, float)) and "worker" in v:
            out.setdefault(v["worker"], []).append((e["t"], v["loss"]))
    return out


def fault_windows(report: dict) -> list[tuple[float, float, str]]:
    return [(f["start_s"], f["end_s"], timeline.fault_label(f)) for f in report.get("faults", [])]


def primary_lanes(history: list[dict], end: float) -> dict[str, list[tuple[float, float, str]]]:
    """A lane per shard, a bar per epoch naming its primary (the timeline's promotions)."""
    return {f"shard {shard}": [(t, ps[i + 1][0] if i + 1 < len(ps) else end, f"e{ep} {node}")
                               for i, (t, ep, node) in enumerate(ps)]
            for shard, ps in timeline.promotions(history).items()}


def lag_series(history: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """Entries each replica trails its primary, from the harness's periodic status samples."""
    by_tick: dict[float, list[dict]] = {}
    need = ("tick", "shard", "role", "epoch", "seq", "node")
    for e in history:
        v = e.get("value") or {}
        if e.get("f") == "sample" and all(k in v for k in need):     # another system's samples differ
            by_tick.setdefault(v["tick"], []).append(v | {"t": e["t"]})
    out: dict[str, list[tuple[float, float]]] = {}
    for samples in by_tick.values():
        prim = {s["shard"]: s for s in samples if s["role"] == "primary"}
        for s in samples:
            p = prim.get(s["shard"])
            if p is not None and s["role"] == "replica" and s["epoch"] == p["epoch"]:
                out.setdefault(s["node"], []).append((s["t"], max(p["seq"] - s["seq"], 0)))
    return out


def throughput(history: list[dict], bucket: float = 1.0) -> dict[str, list[tuple[float, float]]]:
    counts: dict[int, int] = {}
    for e in history:
        if e.get("f") == "push" and e.get("type") == "ok":
            counts[int(e["t"] // bucket)] = counts.get(int(e["t"] // bucket), 0) + 1
    if not counts:
        return {}
    return {"acked pushes/s": [(k * bucket, counts.get(k, 0) / bucket) for k in range(min(counts), max(counts) + 1)]}


def failover_items(report: dict) -> list[tuple[str, dict[str, float], str]]:
    out = []
    for f in report.get("failover_times", []):
        label = f"{f['kind']} {f['target']} at {ticks.seconds(f['fault_t'])}" if "fault_t" in f else \
            f"{f['kind']} {f['target']}"
        if f.get("ms") is not None:
            out.append((label, {"ms": f["ms"]}, f"epoch {f['new_epoch']}" if f.get("new_epoch") else ""))
        else:
            out.append((label, {}, "never completed"))
    return out


MAX_SYNC_ROWS = 30


def sync_items(history: list[dict]) -> list[tuple[str, dict[str, float], str]]:
    """Catch-up transfers, largest first (at most MAX_SYNC_ROWS; the rest are counted in the title)."""
    rows = [(f"{e['value']['dst']} at {ticks.seconds(e['t'])}",
             {k: e["value"][key] for k, key in (("sent", "bytes"), ("changed", "changed_bytes"),
                                                ("snapshot", "snapshot_bytes")) if e["value"].get(key) is not None},
             str(e["value"].get("kind", "")))
            for e in history if e.get("f") == "sync"]                # an older history may lack a figure
    return sorted(rows, key=lambda r: -r[1].get("sent", 0))[:MAX_SYNC_ROWS]


def badge(report: dict) -> str:
    """What every plot of a simulated run says about itself."""
    return "simulated · virtual time" if report.get("simulated") else ""


def check_rows(report: dict, moments: dict[str, list[Moment]]) -> str:
    rows = []
    for name, c in report.get("checks", {}).items():
        ev = escape(json.dumps(c.get("details", {}), indent=1, default=str)[:20000])
        links = "".join(f'<li><a href="#{m.id}">{escape(ticks.seconds(m.t))}</a> {escape(m.node or "")} '
                        f'{escape(m.label)}</li>' for m in moments.get(name, []))
        links = f'<ul class="moments">{links}</ul>' if links else ""
        rows.append(f'<tr><td>{escape(name)}</td><td class="{_verdict_class(c["valid"])}">{escape(str(c["valid"]))}'
                    f'</td><td>{links}<details><summary>evidence</summary><pre>{ev}</pre></details></td></tr>')
    for label, picked in (("excluded", report.get("excluded_checks")), ("not applicable", report.get("checks_not_applicable"))):
        for name, why in (picked or {}).items():
            rows.append(f'<tr><td>{escape(name)}</td><td>{label}</td><td>{escape(str(why))}</td></tr>')
    return "".join(rows)


def render(report: dict, history: list[dict]) -> str:
    end = max((e["t"] for e in history if math.isfinite(e["t"])), default=1.0)
    m = report.get("metrics", {})
    fo = m.get("failover_ms") or {}
    verdict = report["verdict"]
    b = badge(report)
    xlabel = "virtual seconds since the run started" if b else "seconds since the run started"
    moments = evidence.moments(report.get("checks", {}), history)
    spec = report.get("scenario_spec")
    spec_text = yaml.safe_dump(spec, sort_keys=False) if spec else "(not recorded)"
    metrics_rows = "".join(f"<tr><td>{escape(k)}</td><td>{escape(_metric(v, k))}</td></tr>" for k, v in m.items())
    windows = fault_windows(report)
    syncs = sum(1 for e in history if e.get("f") == "sync")
    sections = [
        ("Timeline", timeline_svg.render(timeline.build(history, report.get("faults", [])),
                                         [x for ms in moments.values() for x in ms], b, xlabel=xlabel)),
        ("Training loss", svg.lines("training loss per worker, fault windows shaded", loss_series(history),
                                    windows, xlabel=xlabel, ylabel="loss", badge=b, x_end=end)),
        ("Primary of each shard", svg.lanes("primary per shard and epoch", primary_lanes(history, end), end,
                                            badge=b, xlabel=xlabel)),
        ("Failover time", svg.hbars("time from fault to first ack at the new epoch", failover_items(report),
                                    xfmt=ticks.millis, xlabel="from the fault to the first ack at the new epoch"
                                    + (" (virtual time)" if b else ""),
                                    badge=b)),
        ("Replication lag", svg.lines("entries each replica trails its primary", lag_series(history), windows,
                                      xlabel=xlabel, ylabel="entries behind", yfmt=ticks.count, badge=b, x_end=end)),
        (f"Catch-up bytes ({min(syncs, MAX_SYNC_ROWS)} largest of {syncs})" if syncs > MAX_SYNC_ROWS else
         "Catch-up bytes", svg.hbars("bytes sent vs changed vs a full snapshot", sync_items(history),
                                     xfmt=ticks.nbytes, badge=b)),
        ("Throughput", svg.lines("acknowledged pushes per second", throughput(history), windows, xlabel=xlabel,
                                 ylabel="acked pushes/s", yfmt=ticks.count, badge=b, x_end=end)),
    ]
    body = "".join(f"<h2>{escape(t)}</h2>{plot}" for t, plot in sections)
    def dash(v, fmt: ticks.Formatter = ticks.plain) -> str:
        return escape(ticks.maybe(v, fmt))

    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>pschaos {escape(report['scenario'])}: {escape(verdict)}</title><style>{CSS}{timeline_svg.CSS}</style></head>
<body>
<h1>{escape(report['scenario'])}: <span class="{_verdict_class(verdict)}">{escape(verdict.upper())}</span></h1>
<p>seed {escape(str(report['seed']))} · backend {escape(str(report['backend']))} · {dash(report.get('wall_s'), ticks.seconds)} ·
lost acknowledged updates {dash(m.get('lost_acked_updates'), ticks.count)} · failovers {dash(m.get('failovers'), ticks.count)}
(p50 {dash(fo.get('p50'), ticks.millis)}, p99 {dash(fo.get('p99'), ticks.millis)}) · final loss {dash(m.get('final_loss'))} ·
ETTR {dash(m.get('ettr'), ticks.percent)} · goodput {dash(m.get('goodput'))} steps/s</p>
<p>rerun: <code>{escape(report['rerun'])}</code></p>
{_simulated(report)}
{body}
<h2>Checks</h2><table><tr><th>check</th><th>valid</th><th></th></tr>{check_rows(report, moments)}</table>
<h2>Metrics</h2><table>{metrics_rows}</table>
<h2>Scenario as run</h2><pre>{escape(spec_text)}</pre>
</body></html>
"""


def _number(v, step: float = 0.0, ref: float = 0.0) -> str:
    """A metric with no unit: a whole count in full (`18,891`), anything else to 4 significant
    digits with no exponent (`0.000012`, not `1.2e-05`)."""
    if isinstance(v, int):
        return f"{v:,}"
    return ticks.plain(v)


def _metric(v, name: str = "") -> str:
    """A metric cell in its unit (`*_bytes` in kB/MB, `*_ms` and `*_s` as durations), the dash for none."""
    if isinstance(v, dict):
        return ", ".join(f"{k} {_metric(x, name if k in ('p50', 'p99', 'max') else k)}" for k, x in v.items())
    fmt = ticks.nbytes if name.endswith("bytes") else ticks.millis if name.endswith("_ms") else \
        ticks.seconds if name.endswith("_s") else _number
    return ticks.maybe(v, fmt)


def write(report: dict, history: list[dict], out_dir: Path) -> Path:
    path = out_dir / "report.html"
    path.write_text(render(report, history))
    return path
