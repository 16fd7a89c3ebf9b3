"""`pschaos bench sim --ray-seeds N`: how seeds of nemesis-soak on the twin scale out on Ray.

The same N seeds run twice through `--on ray`'s executor on a local cluster bound to 127.0.0.1:
with one Ray worker (one node, one CPU), then with two (two nodes of one CPU). Printed for each:
the wall time, seeds per hour, and per seed the wall and CPU seconds its run took (its report's
host_load.own_cpu_s); then the scaling efficiency from one worker to two (seeds/hour at two over
twice those at one; the goal is 0.9 or more) and what 1,000 seeds would take on C cores at that
efficiency. Each round's verdicts are compared: the same seeds must judge the same. It asserts
nothing (`make bench` prints, people judge); a round whose verdicts differ says so.
"""
from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from pschaos.harness.run import library

SCENARIO = "nemesis-soak"


def _round(workers: int, seeds: int, out: Path, progress) -> dict:
    """The seeds on a local Ray cluster of `workers` one-CPU nodes: wall, seeds/hour, per-seed figures."""
    from pschaos.harness.fanout.local_ray import LocalRay
    from pschaos.harness.fanout.ray_runs import execute_on_ray
    from pschaos.harness.proof.soak.soak import RunResult, judge_run

    plan = [(s, 1) for s in range(1, seeds + 1)]
    with LocalRay(nodes=workers, cpus=1, connect=False) as cluster:
        t0 = time.monotonic()
        runs = execute_on_ray(library.path_of(SCENARIO), plan, lambda s, k: out / f"w{workers}" / f"seed-{s}", "sim",
                              900.0, cluster.address, 1, RunResult, judge_run, progress=progress)
        wall = time.monotonic() - t0
    cpu = []
    for r in runs:
        rep = r.dir / "report.json"
        got = json.loads(rep.read_text()).get("host_load", {}).get("own_cpu_s") if rep.is_file() else None
        if got is not None:
            cpu.append(float(got))
    return {"workers": workers, "seeds": seeds, "wall_s": round(wall, 1), "seeds_per_hour": round(3600 * seeds / wall, 1),
            "run_wall_s_median": round(statistics.median(r.wall_s for r in runs), 2),
            "run_cpu_s_median": round(statistics.median(cpu), 2) if cpu else None,
            "verdicts": {r.seed: r.verdict for r in runs}, "nodes": len({r.where for r in runs if r.where}),
            "undecided": sum(r.verdict == "unknown" for r in runs)}


def ray_scaling(seeds: int, cores: int, progress=lambda m: None) -> dict:
    """Both rounds and what they say (see the module's docstring)."""
    with tempfile.TemporaryDirectory(prefix="pschaos-bench-ray-") as tmp:
        one = _round(1, seeds, Path(tmp), progress)
        two = _round(2, seeds, Path(tmp), progress)
    eff = two["seeds_per_hour"] / (2 * one["seeds_per_hour"]) if one["seeds_per_hour"] else None
    per_core_h = one["seeds_per_hour"]
    projected = None if not eff else round(1000 / (per_core_h * cores * eff) * 60, 1)
    return {"scenario": SCENARIO, "one_worker": one, "two_workers": two,
            "scaling_efficiency": None if eff is None else round(eff, 3), "goal_efficiency": 0.9,
            "same_verdicts": one["verdicts"] == two["verdicts"], "cores": cores,
            "projected_1000_seeds_min": projected}


def describe(doc: dict) -> str:
    one, two = doc["one_worker"], doc["two_workers"]
    lines = [f"nemesis-soak on the twin through Ray (local cluster on 127.0.0.1, {one['seeds']} seeds a round):"]
    for r in (one, two):
        lines.append(f"  {r['workers']} worker(s): {r['wall_s']} s, {r['seeds_per_hour']} seeds/hour; a seed "
                     f"{r['run_wall_s_median']} s wall, {r['run_cpu_s_median']} CPU-s (medians); {r['nodes']} node(s) ran")
    lines.append(f"  scaling efficiency 1 -> 2 workers: {doc['scaling_efficiency']} (goal {doc['goal_efficiency']}); "
                 f"same verdicts both rounds: {doc['same_verdicts']}")
    if one.get("undecided") or two.get("undecided"):
        lines.append(f"  NOTE: {one.get('undecided')} and {two.get('undecided')} run(s) came back unknown: a run that "
                     "failed fast counts in seeds/hour, so these figures overstate the throughput")
    lines.append(f"  1,000 seeds on {doc['cores']} core(s) at that efficiency ~ {doc['projected_1000_seeds_min']} min")
    return "\n".join(lines)
