"""What a real run's folder says of the host it ran on: the background load beside it and the host-speed probe's reading, for the twin run that is to match it (calibrate and validate both read them)."""
from __future__ import annotations

import json
from pathlib import Path

from pschaos.harness.machinery.hostspeed import usable


def _host_load(run_dir: Path) -> dict:
    """A run's report.json `host_load` ({} when absent: a report from before it)."""
    return json.loads((run_dir / "report.json").read_text()).get("host_load") or {}


def measured_background(run_dir: Path) -> float:
    """The cores other tenants used during a real run (its report's host_load), 0 when absent."""
    return float(_host_load(run_dir).get("background_cores") or 0.0)


def measured_probe(run_dir: Path) -> float | None:
    """The host's speed probe during a real run (its report's host_load, hostspeed.py), None when absent."""
    v = _host_load(run_dir).get("probe_ms")
    return float(v) if usable(v) else None


def probe_why(run_dir: Path) -> str:
    """Why a real run's report has no probe_ms (report.json host_load.probe_unknown, or its absence)."""
    return _host_load(run_dir).get("probe_unknown") or "its report has no host_load.probe_ms"
