"""`pschaos bench sim`: the simulator's speed against real processes, as ratios from one run.

Issue 8's speed targets are wall-time ratios on the same machine: the scenario library on
`--backend sim` against `--backend process` (same seeds), and a 1000-seed soak of nemesis-soak
on the simulator. This bench runs the chosen scenarios one after another on both backends
(never two at once, so neither slows the other), then a few seeds of nemesis-soak on the
simulator the way `pschaos soak` runs them (forked from a warm process), and prints per
scenario the wall seconds on each backend and their ratio, the ratio over them all, and the
soak's seconds per seed with what 1000 seeds would take on this machine's cores. Beside each
wall time, the CPU seconds the run's own processes used: a real cluster that keeps the host's
cores busy is CPU-bound, and a twin that runs psnodes' own store, codec and client on every copy
in one process gains only what it leaves out (gRPC, the processes' boundaries, idle waits), not
the x20 a mostly idle cluster would allow. It asserts nothing: `make bench` prints, people judge.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from pschaos.harness.run import library

DEFAULT = ("kill-primary", "pause-primary", "replica-restart-catchup", "partition-primary-replicas",
           "loss-5-worker-links", "nemesis-soak")


def _wall(scenario: str, backend: str, seed: int, out: Path) -> tuple[float, str, float | None]:
    """Wall seconds, verdict, and the CPU seconds the run's own processes used (report.json
    host_load.own_cpu_s: the harness and, on process, every node and worker; None if unread)."""
    from pschaos.harness.run.runner import Runner
    from pschaos.harness.run.scenario import load_scenario

    sc = load_scenario(library.path_of(scenario))
    t0 = time.monotonic()
    rep = Runner(sc, seed, out / f"{scenario}-{backend}", backend, quiet=True).run()
    return time.monotonic() - t0, rep.get("verdict", "unknown"), (rep.get("host_load") or {}).get("own_cpu_s")


def _soak_per_seed(seeds: int, out: Path) -> float:
    """Wall seconds per seed of nemesis-soak on sim, run one at a time through soak's warm forks."""
    from pschaos.harness.proof.soak.soak import execute

    t0 = time.monotonic()
    plan = [(s, 1) for s in range(1, seeds + 1)]
    runs = execute(library.path_of("nemesis-soak"), plan, out / "soak", 1, "sim", 1, 900.0)
    if any(r.verdict != "pass" for r in runs):
        print(f"pschaos bench sim: a soak seed did not pass: {[(r.seed, r.verdict) for r in runs]}", file=sys.stderr)
    return (time.monotonic() - t0) / seeds


def bench_sim(args) -> int:
    names = tuple(s.strip() for s in args.scenarios.split(",")) if args.scenarios else DEFAULT
    missing = [n for n in names if n not in library.names()]
    if missing:
        print(f"pschaos bench sim: --scenarios: no library scenario {missing}; see scenarios/*.yaml", file=sys.stderr)
        return 2
    if getattr(args, "ray_seeds", 0) and not args.scenarios and not args.soak_seeds:     # the Ray figures alone
        return _ray_only(args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="pschaos-bench-sim-") as tmp:
        for n in names:
            real, vr, real_cpu = _wall(n, "process", args.seed, Path(tmp))
            sim, vs, sim_cpu = _wall(n, "sim", args.seed, Path(tmp))
            rows.append({"scenario": n, "process_s": round(real, 1), "sim_s": round(sim, 1),
                         "ratio": round(real / sim, 2) if sim > 0 else None, "verdicts": [vr, vs],
                         "process_cpu_s": real_cpu, "sim_cpu_s": sim_cpu})
            print(f"  {n:28} process {real:6.1f} s ({real_cpu} CPU-s)  sim {sim:6.1f} s ({sim_cpu} CPU-s)  "
                  f"x{real / sim:5.2f}  ({vr}/{vs})", file=sys.stderr, flush=True)
        per_seed = _soak_per_seed(args.soak_seeds, Path(tmp)) if args.soak_seeds else None
    cores = os.cpu_count() or 1
    tot_real, tot_sim = sum(r["process_s"] for r in rows), sum(r["sim_s"] for r in rows)
    cpus = [r["process_cpu_s"] for r in rows]
    cpu_real = None if None in cpus else sum(cpus)         # one unread run: no total rather than a short one
    doc = {"schema": "pschaos.bench-sim/1", "seed": args.seed, "scenarios": rows,
           "total": {"process_s": round(tot_real, 1), "sim_s": round(tot_sim, 1),
                     "ratio": round(tot_real / tot_sim, 2) if tot_sim else None, "target_ratio": 20,
                     # the real cluster's CPU over its wall: near the host's cores, it is CPU-bound, and a
                     # twin that runs the same code in one process cannot beat it by more than the CPU
                     # the twin leaves out (gRPC, process boundaries) allows
                     "process_cpu_s": None if cpu_real is None else round(cpu_real, 1),
                     "process_busy_cores": round(cpu_real / tot_real, 2) if cpu_real is not None and tot_real else None},
           "nemesis_soak": None if per_seed is None else {
               "seeds_timed": args.soak_seeds, "wall_s_per_seed": round(per_seed, 2), "cores": cores,
               "projected_1000_seeds_min": round(1000 * per_seed / cores / 60, 1), "target_min": 10}}
    if getattr(args, "ray_seeds", 0):
        from pschaos.harness.proof.bench.ray_scaling import ray_scaling

        doc["ray"] = ray_scaling(args.ray_seeds, cores, lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        t = doc["total"]
        print(f"library subset: process {t['process_s']} s, sim {t['sim_s']} s: sim is x{t['ratio']} faster "
              f"(target x20); the real runs used {t['process_cpu_s']} CPU-s, {t['process_busy_cores']} of "
              f"{cores} cores on average")
        if per_seed is not None:
            s = doc["nemesis_soak"]
            print(f"nemesis-soak on sim: {s['wall_s_per_seed']} s a seed; 1000 seeds on {cores} cores "
                  f"~ {s['projected_1000_seeds_min']} min (target 10)")
        if doc.get("ray"):
            from pschaos.harness.proof.bench.ray_scaling import describe

            print(describe(doc["ray"]))
    return 0


def _ray_only(args) -> int:
    """`--ray-seeds N --soak-seeds 0` with no --scenarios: only the Ray scaling figures."""
    from pschaos.harness.proof.bench.ray_scaling import describe, ray_scaling

    doc = ray_scaling(args.ray_seeds, os.cpu_count() or 1, lambda m: print(f"  {m}", file=sys.stderr, flush=True))
    print(json.dumps({"schema": "pschaos.bench-sim-ray/1", **doc}, indent=2) if args.json else describe(doc))
    return 0


__all__ = ["bench_sim"]
