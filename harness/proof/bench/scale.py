"""`pschaos bench scale`: the scale level's speed and memory against issue 11's targets, and
against the per-RPC twin measured in the same run.

Each figure comes from a fresh process (`pschaos sim scale --json`), so its resident memory is
its own: 10,000 workers x 500 shards x 3 copies with the llama3 preset for 24 simulated hours
(target: 60 s wall) and for 7 days (target: 10 minutes), both under 2 GiB. The baseline is the
per-RPC twin on the same machine in the same run: kill-primary on `--backend sim`, its worker
steps per wall second; the scale level's is printed as a ratio to it. It asserts nothing:
`make bench` prints, people judge.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pschaos.harness.machinery.tools import REPO
from pschaos.harness.run import library

RUNS = (("24 h", 24.0, 60.0), ("7 days", 168.0, 600.0))
RSS_TARGET_MB = 2048


def _scale(hours: float) -> dict:
    cmd = [sys.executable, "-m", "pschaos.harness.commands.cli", "sim", "scale", "--workers", "10000", "--shards", "500",
           "--copies", "3", "--hours", str(hours), "--failures", "llama3", "--seed", "1", "--json"]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-2000:])
    res = json.loads(p.stdout)
    res["process_wall_s"] = round(time.monotonic() - t0, 2)
    return res


def _twin_steps_per_s() -> float:
    """The per-RPC twin's worker steps per wall second on kill-primary (2 workers x 300 steps)."""
    from pschaos.harness.run.runner import Runner
    from pschaos.harness.run.scenario import load_scenario

    with tempfile.TemporaryDirectory(prefix="pschaos-bench-scale-") as tmp:
        sc = load_scenario(library.path_of("kill-primary"))
        t0 = time.monotonic()
        Runner(sc, 1, Path(tmp) / "kp", "sim", quiet=True).run()
        return sc.cluster.workers * sc.workload.steps / (time.monotonic() - t0)


def bench_scale(args) -> int:
    twin = _twin_steps_per_s()
    print(f"  per-RPC twin (kill-primary): {twin:,.0f} worker steps per wall second", file=sys.stderr, flush=True)
    rows = []
    for label, hours, target in RUNS:
        r = _scale(hours)
        rows.append({"run": label, "hours": hours, "wall_s": r["wall_s"], "process_wall_s": r["process_wall_s"],
                     "target_wall_s": target, "max_rss_mb": r["max_rss_mb"], "target_rss_mb": RSS_TARGET_MB,
                     "events": r["events"], "worker_steps": r["worker_steps"],
                     "worker_steps_per_wall_s": r["worker_steps_per_wall_s"],
                     "vs_twin": round(r["worker_steps_per_wall_s"] / twin, 1)})
        print(f"  10,000 x 500 x 3, {label}: {r['wall_s']} s wall (target {target:g} s, x{target / r['wall_s']:.0f} "
              f"under), {r['max_rss_mb']} MB (target {RSS_TARGET_MB}), {r['worker_steps_per_wall_s']:,} worker "
              f"steps/s = x{rows[-1]['vs_twin']:,} the twin's", file=sys.stderr, flush=True)
    doc = {"schema": "pschaos.bench-scale/1", "twin_steps_per_wall_s": round(twin, 1), "runs": rows}
    print(json.dumps(doc, indent=2) if args.json else
          "\n".join(f"{r['run']}: {r['wall_s']} s wall / {r['target_wall_s']:g} s target, {r['max_rss_mb']} MB" for r in rows))
    return 0
