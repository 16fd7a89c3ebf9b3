"""Run metrics computed from the history (the `metrics` block of report.json)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from pschaos.reports.bounds import holds, parse, value_at
from pschaos.reports.percentiles import failover_stats  # one rule for a run's metrics and the aggregates

from pschaos.harness.checkers.acks import no_lost_acks
from pschaos.harness.checkers.goodput import job_goodput, psnodes_goodput
from pschaos.harness.checkers.jobs import answers, job_no_lost_acks
from pschaos.harness.checkers.base import by_f
from pschaos.harness.checkers.failover import failover_times
from pschaos.harness.checkers.lag import max_lag_seen
from pschaos.harness.checkers.migration import migration_metrics
from pschaos.harness.checkers.spurious import spurious_count
from pschaos.harness.checkers.updates import no_lost_updates


def eval_loss(history: list[dict]) -> float | None:
    """The mean over workers of each one's last evaluation loss (None: no pass succeeded; an
    older history has no eval events at all)."""
    last = {e["value"]["worker"]: e["value"]["loss"] for e in by_f(history, "eval")
            if e["value"].get("loss") is not None}
    return round(float(np.mean(list(last.values()))), 6) if last else None


def failovers(history: list[dict], adapted: bool = False) -> int:
    """Promotions past a shard's first term: psnodes starts every shard at epoch 1 (a shard added
    again after a scale-in retired it, above its old life's epochs: that first term says
    `bootstrap`); an adapted system at whatever term it had when first sampled (Sentinel's 0, Raft's 2)."""
    promotes = [e["value"] for e in by_f(history, "promote")]
    if not adapted:
        return len([v for v in promotes if v["epoch"] > 1 and not v.get("bootstrap")])
    first: dict[int, int] = {}
    for v in promotes:
        first.setdefault(v["shard"], v["epoch"])
    return len([v for v in promotes if v["epoch"] > first[v["shard"]]])


def watch_reads(history: list[dict]) -> tuple[int | None, float | None]:
    """The etcd reads the workers' deposed-primary watches made (each worker's last cumulative
    `watch_reads`, summed) and their rate over the training time (first train-step to the last
    train event). (None, None): no worker event carries the field (an older history), or some
    worker's last one says None (a simulated run: the twin models the watch, counts no reads)."""
    last: dict[str, int | None] = {}
    times: list[float] = []
    for e in history:
        if e.get("f") in ("train-step", "train-done") and "watch_reads" in e.get("value", {}):
            last[e["value"]["worker"]] = e["value"]["watch_reads"]
            times.append(e["t"])
    if not last or any(v is None for v in last.values()):
        return None, None
    total = sum(v for v in last.values() if v is not None)
    span = max(times) - min(times)
    return total, round(total / span, 2) if span > 0 else None


def compute(history: list[dict], ctx: dict) -> dict:
    oks = by_f(history, "push", "ok")
    updates = by_f(history, "update", "ok")       # an adapted system's acknowledged updates
    if "job" in ctx:            # a training job: its audit and its goodput (checkers/jobs.py, goodput.py)
        lost = job_no_lost_acks(history, ctx)
    else:
        lost = no_lost_updates(history, ctx) if updates else no_lost_acks(history, ctx)
    lost_n = lost.details.get("lost") if lost.valid != "unknown" else None
    fo = failover_times(history)
    done = [e["value"]["final_loss"] for e in by_f(history, "train-done") if e["value"].get("final_loss") is not None]
    syncs = [e["value"] for e in by_f(history, "sync")]
    pulls = [e["value"].get("pulled_bytes", 0) for e in by_f(history, "train-step")]
    return {
        "acked_updates": len(oks) + len(updates) + len({e["value"]["step"] for e in by_f(history, "step", "ok")}),
        "lost_acked_updates": lost_n,
        "failovers": failovers(history, adapted=ctx.get("system", "psnodes") != "psnodes"),
        "failover_ms": failover_stats([f["ms"] for f in fo]),
        "failover_failed": sum(1 for f in fo if f["ms"] is None),
        # promotions while the old primary was alive and reachable (None: the history cannot say)
        "spurious_failovers": spurious_count(history),
        "restores": len(by_f(history, "restore")),
        "checkpoint_skips": len(by_f(history, "checkpoint-skipped")),
        "isr_deferred": len(by_f(history, "isr-deferred")),
        "final_loss": round(float(np.mean(done)), 6) if done else None,
        "baseline_loss": None,
        "eval_loss": eval_loss(history),
        "eval_passes": sum(1 for e in by_f(history, "eval") if e["value"].get("loss") is not None),
        "sync_bytes": sum(s["bytes"] for s in syncs),
        "changed_bytes": sum(s["changed_bytes"] for s in syncs),
        "snapshot_bytes": sum(s["snapshot_bytes"] for s in syncs),
        "worker_pull_bytes": int(sum(pulls)),
        "duplicate_acks": sum(1 for e in oks if e["value"].get("duplicate")),
        # the largest sampled lag of an in-sync replica behind its primary, in entries
        "replication_lag_max": max_lag_seen(history),
        "watch_reads": watch_reads(history)[0],
        "watch_reads_per_s": watch_reads(history)[1],
        "steps": sum(e["value"]["steps"] for e in by_f(history, "train-done")),
        "first_step_s": next((round(e["t"], 3) for e in by_f(history, "train-step")), None),
        **migration_metrics(history),
        **(job_goodput(history) if "job" in ctx else
           psnodes_goodput(history, lost_n, len(oks))),
        # a training job: seconds from each fault to its first acknowledged step past the one in
        # flight (a job that never trained again counts as inf), gateable as recovery_s.max
        **({"recovery_s": failover_stats([r["back_s"] for r in answers(history)])} if "job" in ctx else {}),
    }


def check_bounds(metrics: dict, bounds: list[str]) -> list[dict]:
    """Each bound with its value and whether it holds (None value: the metric is absent)."""
    out = []
    for b in bounds:
        name, op, num = parse(b)
        val = value_at(metrics, name)
        out.append({"bound": b, "metric": name, "value": val, "holds": holds(val, op, num)})
    return out
