"""The scale level's pages: one run (`pschaos sim scale --out`) and a sweep's aggregate
(`pschaos sim sweep`). Same house as report.html: one self-contained file, inline SVG, no script;
every plot carries the "simulated" badge, and its time axis is virtual time.
"""
from __future__ import annotations

import json
from html import escape
from pathlib import Path

from pschaos.reports import svg, ticks
from pschaos.reports.html import CSS


BADGE = "simulated (scale level) · virtual time"
PROBABILITIES = ("p_shard_loss", "markov_p_shard_loss", "p_acked_loss", "p_shard_loss_sigma", "saturation")
def _fmt_for(y: str):
    if y.startswith(("failover_ms", "spurious_failover_ms")):
        return ticks.millis
    if y.endswith("bytes"):
        return ticks.nbytes
    if y in PROBABILITIES or y.startswith("availability."):
        return ticks.percent
    return ticks.count


def _cell(v, y: str) -> str:
    """A table cell: probabilities to two decimals of a percent (a 0.25% loss is not 0%)."""
    if isinstance(v, float) and (y in PROBABILITIES or y.startswith("availability.")):
        return f"{v:.2%}"
    return ticks.maybe(v, _fmt_for(y))


def _page(title: str, body: list[str]) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{CSS}</style></head><body>" + "".join(body) + "</body></html>")


def _table(rows: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows) + "</table>"


def _ecdf(res: dict) -> dict[str, list[tuple[float, float]]]:
    """The failovers' times as an ECDF (from the run's quantiles of every one), real and spurious apart."""
    out: dict[str, list[tuple[float, float]]] = {}
    for name, ms in (res.get("failover_quantiles_ms") or {}).items():
        if ms:
            out[name] = [(m, (i + 1) / len(ms)) for i, m in enumerate(ms)]
    return out


def _raw(res: dict) -> dict:
    return {k: v for k, v in res.items() if k not in ("series", "incidents", "failover_quantiles_ms")}


def _dist(d: str | None, unit: str) -> str:
    return "none" if d is None else f"{d} {unit}"


def summary_md(res: dict) -> str:
    """summary.md of a scale run: the figures a pull request quotes, with units."""
    sp, fo = res["spec"], res["failover_ms"]
    rows = [("cluster", f"{sp['workers']:,} workers x {sp['shards']} shards x {sp['copies']} copies, "
                        f"{sp['hours']:g} simulated h, failures {sp['failures']['preset']}"),
            ("worker steps", f"{res['worker_steps']:,} ({res['steps_per_simulated_s']:,}/s)"),
            ("failovers", f"{res['failovers']} ({res['spurious_failovers']} spurious), p50 "
                          f"{ticks.maybe(fo['p50'], ticks.millis)}, p99 {ticks.maybe(fo['p99'], ticks.millis)}"),
            ("lost acked updates", f"{res['lost_acked_updates']:,}"),
            ("availability", _cell(res["availability"]["cluster"], "availability.cluster")),
            ("wall", f"{res['wall_s']} s, {res['events']:,} events"), ("rerun", f"`{res['rerun']}`")]
    return ("# scale run (simulated)\n\n| | |\n|---|---|\n"
            + "".join(f"| {k} | {v.replace('|', '/')} |\n" for k, v in rows))


def write_run(res: dict, path: Path) -> Path:
    sp, fo = res["spec"], res["failover_ms"]
    rate: list[tuple[float, float]] = []
    pts = res["series"]
    for (t0, g0), (t1, g1) in zip(pts, pts[1:]):
        if t1 > t0:
            rate.append((t1 / 3600, (g1 - g0) / (t1 - t0)))
    fl = sp["failures"]
    windows = [(t / 3600, (t + ms / 1000) / 3600, what) for t, ms, what in res.get("incidents", [])]
    rows = [("cluster", f"{sp['workers']} workers · {sp['shards']} shards · {sp['copies']} copies · "
                        f"{sp['replication']} replication · {sp['training']} training · model {sp['model']}"),
            ("failures", f"{fl['preset']}: workers MTBF {_dist(fl['worker_mtbf_h'], 'h')}, repair "
                         f"{_dist(fl['worker_repair_s'], 's')}; servers MTBF {_dist(fl['server_mtbf_h'], 'h')}, "
                         f"repair {_dist(fl['server_repair_s'], 's')}; etcd MTBF {_dist(fl.get('etcd_mtbf_h'), 'h')}"),
            ("source", sp["failures"].get("source") or "–"),
            ("simulated", f"{sp['hours']:g} h in {res['wall_s']} s wall, {res['events']:,} events"),
            ("worker steps", f"{res['worker_steps']:,} ({res['steps_per_simulated_s']:,} /s simulated; "
                             f"{res['ideal_steps_per_s']:,} /s with no queue and no stall: "
                             f"{_cell(res.get('saturation'), 'saturation')} short of it)"),
            ("failovers", f"{res['failovers']} ({res['spurious_failovers']} spurious); p50 "
                          f"{ticks.maybe(fo['p50'], ticks.millis)}, p99 {ticks.maybe(fo['p99'], ticks.millis)}"),
            ("lost acked updates", f"{res['lost_acked_updates']:,} in {res['data_loss_events']} restore(s); "
                                   f"{res['orphaned_shards']} shard(s) lost every in-sync copy"),
            ("availability", f"cluster {ticks.maybe(res['availability']['cluster'], ticks.percent)}, "
                             f"per shard {ticks.maybe(res['availability']['shard'], ticks.percent)}"),
            ("time to target", "–" if res["time_to_target_s"] is None else ticks.seconds(res["time_to_target_s"])),
            ("calibration", res.get("calibration") or "–"), ("seed", str(sp["seed"]))]
    body = [f"<h1>scale run: {sp['workers']:,} workers × {sp['shards']} shards</h1>",
            f"<p>Rerun: <code>{escape(res['rerun'])}</code></p>", _table(rows), "<h2>Training throughput</h2>",
            f"<p>Shaded: failovers and restores (the first {len(windows)}, spurious ones last).</p>" if windows else "",
            svg.lines("worker steps per second", {"steps/s": rate}, windows=windows, xlabel="simulated hours",
                      ylabel="steps/s", yfmt=ticks.count, xfmt=ticks.plain, badge=BADGE),
            "<h2>Failover time</h2>",
            svg.lines("failover time, ECDF", _ecdf(res), xlabel="from the primary's loss until its shard acks again", ylabel="fraction",
                      yfmt=ticks.percent, xfmt=ticks.millis, badge=BADGE),
            "<h2>Progress</h2>",
            svg.lines("worker steps", {"steps": [(t / 3600, g) for t, g in pts]}, xlabel="simulated hours",
                      ylabel="steps", yfmt=ticks.count, xfmt=ticks.plain, badge=BADGE),
            f"<h2>Raw figures</h2><pre>{escape(json.dumps(_raw(res), indent=1))}</pre>"]
    path.write_text(_page(f"scale run {sp['workers']}x{sp['shards']}", body))
    return path


def write_sweep(agg: dict, path: Path) -> Path:
    body = [f"<h1>sweep: {escape(agg['name'])}</h1>", f"<p>{escape(agg.get('description') or '')}</p>",
            f"<p>{len(agg['rows'])} grid points × {len(agg['seeds'])} seed(s), in {agg.get('wall_s', '–')} s wall. "
            f"Base settings: <code>{escape(json.dumps(agg['base']))}</code></p>"]
    for p in agg["plots"]:
        x, y, series = p["x"], p["y"], p.get("series")
        lines: dict[str, list[tuple[float, float]]] = {}
        for row in agg["rows"]:
            v = row.get(y)
            if v is None:
                continue
            name = f"{series}={row['point'][series]}" if series else y
            lines.setdefault(name, []).append((row["at"][x], float(v)))
            if y == "p_shard_loss" and row.get("markov_p_shard_loss") is not None:
                lines.setdefault(f"Markov {name}", []).append((row["at"][x], row["markov_p_shard_loss"]))
        title = p.get("title") or f"{y} against {x}"
        distributed = any(isinstance(r["point"][x], str) for r in agg["rows"])
        body += [f"<h2>{escape(title)}</h2>",
                 svg.lines(title, lines, xlabel=f"{x} (mean)" if distributed else x, ylabel=y, yfmt=_fmt_for(y),
                           xfmt=ticks.plain, badge=BADGE)]
    head = list(agg["rows"][0]["point"]) if agg["rows"] else []
    cols = list(dict.fromkeys([p["y"] for p in agg["plots"]]
                              + [c for c in ("markov_p_shard_loss", "p_shard_loss_sigma") if agg["rows"]
                                 and c in agg["rows"][0]]))
    body.append("<h2>Every grid point</h2><table><tr>" + "".join(f"<th>{escape(c)}</th>" for c in head + cols)
                + "<th>seeds</th></tr>" + "".join(
                    "<tr>" + "".join(f"<td>{escape(str(r['point'][c]))}</td>" for c in head)
                    + "".join(f"<td>{escape(_cell(r.get(c), c))}</td>" for c in cols)
                    + f"<td>{r['seeds']}</td></tr>" for r in agg["rows"]) + "</table>")
    path.write_text(_page(f"sweep {agg['name']}", body))
    return path
