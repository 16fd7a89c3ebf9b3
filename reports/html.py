"""report.html: one self-contained page (inline SVG and CSS, no scripts, no network).

At the top the verdict and the rerun command; then training loss over time with every fault
window shaded and labelled, who was primary of each shard in which epoch, the failover time
distribution, replication lag and catch-up bytes (incremental against snapshot), throughput over
time, the checks with their evidence, and the scenario as run.
"""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

import yaml

from . import svg

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
.barlabel{font-size:10px;fill:#fff}
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
    out: dict[str, list[tuple[float, float]]] = {}
    for e in history:
        if e.get("f") == "train-step":
            out.setdefault(e["value"]["worker"], []).append((e["t"], e["value"]["loss"]))
    return out


def fault_windows(report: dict) -> list[tuple[float, float, str]]:
    return [(f["start_s"], f["end_s"], f"{f['kind']} {f['target']}") for f in report.get("faults", [])]


def primary_lanes(history: list[dict], end: float) -> dict[str, list[tuple[float, float, str]]]:
    proms: dict[int, list[tuple[float, int, str]]] = {}
    for e in history:
        if e.get("f") == "promote":
            v = e["value"]
            proms.setdefault(v["shard"], []).append((e["t"], v["epoch"], v["node"]))
    lanes = {}
    for shard, ps in proms.items():
        ps.sort()
        lanes[f"shard {shard}"] = [(t, ps[i + 1][0] if i + 1 < len(ps) else end, f"e{ep} {node}")
                                   for i, (t, ep, node) in enumerate(ps)]
    return lanes


def lag_series(history: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """Entries each replica trails its primary, from the harness's periodic status samples."""
    by_tick: dict[float, list[dict]] = {}
    for e in history:
        if e.get("f") == "sample":
            by_tick.setdefault(e["value"]["tick"], []).append(e["value"] | {"t": e["t"]})
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


def failover_items(report: dict) -> list[tuple[str, dict[str, float]]]:
    return [(f"{f['kind']} {f['target']}", {"ms": f["ms"]}) for f in report.get("failover_times", [])
            if f.get("ms") is not None]


def sync_items(history: list[dict]) -> list[tuple[str, dict[str, float]]]:
    return [(f"{e['value']['dst']} ({e['value']['kind']})",
             {"sent": e["value"]["bytes"], "changed": e["value"]["changed_bytes"],
              "snapshot": e["value"]["snapshot_bytes"]})
            for e in history if e.get("f") == "sync"]


def render(report: dict, history: list[dict]) -> str:
    end = max((e["t"] for e in history), default=1.0)
    m = report.get("metrics", {})
    fo = m.get("failover_ms", {})
    verdict = report["verdict"]
    rows = []
    for name, c in report.get("checks", {}).items():
        ev = escape(json.dumps(c.get("details", {}), indent=1, default=str)[:20000])
        rows.append(f'<tr><td>{escape(name)}</td><td class="{_verdict_class(c["valid"])}">{escape(str(c["valid"]))}'
                    f'</td><td><details><summary>evidence</summary><pre>{ev}</pre></details></td></tr>')
    spec = report.get("scenario_spec")
    spec_text = yaml.safe_dump(spec, sort_keys=False) if spec else "(not recorded)"
    metrics_rows = "".join(f"<tr><td>{escape(k)}</td><td>{escape(json.dumps(v))}</td></tr>" for k, v in m.items())
    sections = [
        ("Training loss", svg.lines("training loss per worker, fault windows shaded", loss_series(history),
                                    fault_windows(report), ylabel="loss")),
        ("Primary of each shard", svg.lanes("primary per shard and epoch", primary_lanes(history, end), end)),
        ("Failover time", svg.bars("time from fault to first ack at the new epoch", failover_items(report),
                                   ylabel="ms")),
        ("Replication lag", svg.lines("entries each replica trails its primary", lag_series(history),
                                      fault_windows(report), ylabel="entries")),
        ("Catch-up bytes", svg.bars("bytes sent vs changed vs a full snapshot", sync_items(history), ylabel="bytes")),
        ("Throughput", svg.lines("acknowledged pushes per second", throughput(history), fault_windows(report),
                                 ylabel="pushes/s")),
    ]
    body = "".join(f"<h2>{escape(t)}</h2>{plot}" for t, plot in sections)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>pschaos {escape(report['scenario'])}: {escape(verdict)}</title><style>{CSS}</style></head>
<body>
<h1>{escape(report['scenario'])}: <span class="{_verdict_class(verdict)}">{escape(verdict.upper())}</span></h1>
<p>seed {report['seed']} · backend {escape(report['backend'])} · {report.get('wall_s', '?')} s ·
lost acknowledged updates {m.get('lost_acked_updates')} · failovers {m.get('failovers')}
(p50 {fo.get('p50')} ms, p99 {fo.get('p99')} ms) · final loss {m.get('final_loss')}</p>
<p>rerun: <code>{escape(report['rerun'])}</code></p>
{_simulated(report)}
{body}
<h2>Checks</h2><table><tr><th>check</th><th>valid</th><th></th></tr>{''.join(rows)}</table>
<h2>Metrics</h2><table>{metrics_rows}</table>
<h2>Scenario as run</h2><pre>{escape(spec_text)}</pre>
</body></html>
"""


def write(report: dict, history: list[dict], out_dir: Path) -> Path:
    path = out_dir / "report.html"
    path.write_text(render(report, history))
    return path
