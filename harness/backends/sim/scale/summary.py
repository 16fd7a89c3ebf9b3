"""What a scale run reports: the JSON `pschaos sim scale --json` prints (schema pschaos.scale/1)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pschaos.harness.backends.sim.scale.params import mean_step

if TYPE_CHECKING:
    from pschaos.harness.backends.sim.scale.state import RunState

SCHEMA = "pschaos.scale/1"
INCIDENTS = 200         # failovers and restores kept for the report's plot, in time order


def _pct(xs: list[float], q: float) -> float | None:
    return None if not xs else round(float(np.percentile(np.asarray(xs), q * 100, method="nearest")), 1)


def _series(run: "RunState", points: int = 200) -> list[list[float]]:
    """The progress curve (simulated s, global steps), thinned to about `points` points."""
    s = run.series
    step = max(1, len(s) // points)
    s = s + [(run.now, run.global_steps)]
    out = s[::step] + ([s[-1]] if (len(s) - 1) % step else [])
    return [[round(t, 3), round(g, 1)] for t, g in out]


def rerun(run: "RunState") -> str:
    """The exact command that gives this result again: every setting that differs from the
    defaults, the failure distributions spelled out, and the calibration file."""
    from pschaos.harness.backends.sim.scale.params import ScaleSpec

    sp, base = run.spec, ScaleSpec()
    parts = ["pschaos sim scale"]
    for f in ("workers", "shards", "copies", "hours", "seed", "model", "replication", "training", "param_mb",
              "shards_per_step", "heartbeat_s", "suspect_s", "detector", "heartbeat_loss", "checkpoint_interval_s",
              "target_steps", "candidate_window_s", "lease_ttl_s", "max_lag", "min_isr", "server_request_s"):
        v = getattr(sp, f)
        if v != getattr(base, f) or f in ("workers", "shards", "copies", "hours", "seed"):
            parts.append(f"--{f.replace('_', '-')} {v!r}")
    fl = sp.failures
    parts.append(f"--failures {fl.name.split('+')[0]}")
    if "+" in fl.name:
        for flag, d in (("worker-mtbf", fl.worker_mtbf_h), ("worker-repair", fl.worker_repair_s),
                        ("server-mtbf", fl.server_mtbf_h), ("server-repair", fl.server_repair_s),
                        ("etcd-mtbf", fl.etcd_mtbf_h), ("etcd-repair", fl.etcd_repair_s)):
            if d is not None:
                parts.append(f"--{flag} {d.text()}")
    if run.cal_path:
        parts.append(f"--calibration {run.cal_path}")
    if sp.schedule:
        parts.append("# plus an explicit schedule (spec.schedule): the API, not the command line")
    return " ".join(parts)


def _quantiles(xs: list[float], points: int = 101) -> list[float]:
    """The distribution in at most `points` evenly spaced quantiles (the report draws its ECDF)."""
    if not xs:
        return []
    a = np.sort(np.asarray(xs))
    if len(a) <= points:
        return [round(float(x), 1) for x in a]
    return [round(float(x), 1) for x in np.quantile(a, np.linspace(0, 1, points), method="nearest")]


def _incidents(found: list) -> list:
    """The first INCIDENTS failovers and restores in time, host failures' before spurious ones."""
    keep = sorted(found, key=lambda i: (i[2].startswith("spurious"), i[0]))[:INCIDENTS]
    return sorted(keep, key=lambda i: i[0])


def summary(run: "RunState", wall_s: float, maxrss_kb: int) -> dict:
    sp, t, ty = run.spec, run.t, run.tally
    sim_s = run.now
    shards_time = sim_s * sp.shards
    steps = run.global_steps
    return {
        "schema": SCHEMA,
        "level": "scale",
        "rerun": rerun(run),
        "spec": sp.to_json(),
        "calibration": run.cal_path,
        "wall_s": round(wall_s, 3),
        "simulated_s": round(sim_s, 1),
        "events": run.events,
        "ticks": run.tally.ticks,
        "worker_steps": int(round(steps)),
        "worker_steps_per_wall_s": int(steps / wall_s) if wall_s > 0 else None,
        "steps_per_worker": {"min": int(run.worker_steps.min()), "p50": int(np.median(run.worker_steps)),
                             "max": int(run.worker_steps.max())},
        "steps_per_simulated_s": round(steps / sim_s, 1) if sim_s else None,
        "ideal_steps_per_s": round(sp.workers / (run.bsp or mean_step(t)), 1),
        "saturation": round(1 - (steps / sim_s) / (sp.workers / (run.bsp or mean_step(t))), 4) if sim_s else None,
        "effective_steps": int(run.effective_steps()),
        "failovers": ty.failovers,
        "spurious_failovers": ty.spurious_failovers,
        "failover_ms": {"p50": _pct(ty.failover_ms, 0.5), "p99": _pct(ty.failover_ms, 0.99),
                        "max": _pct(ty.failover_ms, 1.0)},
        "spurious_failover_ms": {"p50": _pct(ty.spurious_ms, 0.5), "p99": _pct(ty.spurious_ms, 0.99)},
        "failover_quantiles_ms": {"failovers": _quantiles(ty.failover_ms), "spurious": _quantiles(ty.spurious_ms)},
        "lost_acked_updates": int(ty.lost_acked_updates),
        "data_loss_events": ty.data_loss_events,
        "shards_lost": len(ty.shards_lost),
        "orphaned_shards": len(ty.orphaned),
        "restores": ty.restores,
        "server_failures": ty.server_failures,
        "worker_failures": ty.worker_failures,
        "etcd_failures": ty.etcd_failures,
        "catchups": dict(ty.catchups),
        "catchup_bytes": int(ty.catchup_bytes),
        "availability": {"cluster": round(1 - ty.stalled_s / sim_s, 6) if sim_s else None,
                         "shard": round(1 - ty.shard_down_s / shards_time, 8) if shards_time else None},
        "time_to_target_s": None if run.target_at is None else round(run.target_at, 1),
        "target_steps": sp.target_steps,
        "timings": {"step_s": round(t.step_s, 6), "service_s": t.service_s, "elect_s": round(t.elect_s, 6),
                    "detect_s": round(t.detect_s, 6), "probe_s": round(t.probe_s, 6), "teardown_s": round(t.teardown_s, 6),
                    "retry_s": round(t.retry_s, 6), "rediscover_s": round(t.rediscover_s, 6), "shard_bytes": t.shard_bytes,
                    "server_request_s": next(v for v in (sp.server_request_s, run.cal.server_request_s,
                                                         2 * t.fixed_s) if v is not None),
                    "restart_s": t.restart_s},
        "max_rss_mb": round(maxrss_kb / 1024, 1),
        "series": _series(run),
        "incidents": _incidents(run.tally.incidents),
    }
