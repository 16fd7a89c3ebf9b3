"""summary.md: a short run summary for a pull-request comment."""
from __future__ import annotations

from pathlib import Path

from pschaos.reports.ticks import maybe, millis, nbytes

MARK = {True: "pass", False: "**FAIL**"}


def cell(value) -> str:
    """Text for a Markdown table cell: a `|` would end the cell and a newline the table."""
    return " ".join(str(value).split()).replace("\\", "\\\\").replace("|", "\\|")


def render(report: dict) -> str:
    m = report.get("metrics", {})
    fo = m.get("failover_ms", {})
    lines = [f"### pschaos `{report['scenario']}`: {report['verdict'].upper()}", "",
             f"seed {report['seed']}, backend {report['backend']}; rerun: `{report['rerun']}`", "",
             *([f"**simulated** in virtual time; timings from calibration `{report['simulated']['calibration']}`", ""]
               if report.get("simulated") else []),
             "| check | result |", "|---|---|"]
    for name, c in report.get("checks", {}).items():
        lines.append(f"| {cell(name)} | {MARK.get(c['valid'], 'unknown')} |")
    for name, why in (report.get("excluded_checks") or {}).items():
        lines.append(f"| {cell(name)} | excluded: {cell(why)} |")
    lines += ["", "| metric | value |", "|---|---|",
              f"| acked updates | {maybe(m.get('acked_updates'))} |",
              f"| lost acked updates | {maybe(m.get('lost_acked_updates'))} |",
              f"| failovers | {maybe(m.get('failovers'))} |",
              f"| failover p50 / p99 / max | {' / '.join(maybe(fo.get(k), millis) for k in ('p50', 'p99', 'max'))} |",
              f"| final loss | {maybe(m.get('final_loss'))} |",
              f"| sync / changed / snapshot bytes | "
              f"{' / '.join(maybe(m.get(k), nbytes) for k in ('sync_bytes', 'changed_bytes', 'snapshot_bytes'))} |"]
    faults = report.get("faults", [])
    if faults:
        lines += ["", "Faults: " + ", ".join(f"{f['kind']} {f['target']} ({f['start_s']}–{f['end_s']} s)"
                                             for f in faults[:12]) + (" ..." if len(faults) > 12 else "")]
    return "\n".join(lines) + "\n"


def write(report: dict, out_dir: Path) -> Path:
    path = out_dir / "summary.md"
    path.write_text(render(report))
    return path
