"""report.json, schema `pschaos.report/1` (see DESIGN.md, "report.json")."""
from __future__ import annotations

import json
from pathlib import Path

SCHEMA = "pschaos.report/1"


def build(scenario: str, backend: str, seed: int, verdict: str, rerun: str, checks: dict, metrics: dict,
          faults: list[dict], extra: dict | None = None) -> dict:
    rep = {"schema": SCHEMA, "scenario": scenario, "backend": backend, "seed": seed, "verdict": verdict,
           "rerun": rerun, "checks": checks, "metrics": metrics, "faults": faults}
    rep.update(extra or {})
    return rep


def write(report: dict, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2, default=str))
    tmp.replace(path)
    return path
