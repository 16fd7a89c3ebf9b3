"""`pschaos sim validate`: the twin's predictions against real runs of the same scenarios and seeds.

For each scenario of a fixed set and each seed, the scenario runs on the process backend (real
processes) and on the sim backend; per metric the measured value (real), the prediction (sim) and
the relative error are printed, pooled over the seeds:
- failover p50 and p99 (ms, every failover of every seed pooled),
- acknowledged pushes per second (training throughput),
- catch-up bytes and time (`sync` events), replication lag (samples: primary seq minus replica seq),
- SSP staleness where the scenario trains SSP (the largest lead of a worker over another, in
  clocks, from the staleness check; mean over seeds), the final loss (the sim's mean must fall in the
  real runs' band, widened by 10%),
- where the scenario migrates shards (issue 13): the moved keys' write unavailability (each run's
  `migration_unavailable_ms` p50, pooled as the median over seeds), the bytes shipped over the
  moved keys' bytes and the fraction of keys moved (means over seeds), and the hand-off's phases
  (harness/backends/sim/handoff_phases.py: medians over every migration) with the workers' push and pull
  latency (medians of each run's median), so an unavailability the twin misses is traced to a phase.
The twin's cores carry the real run's load (`--background`, harness/backends/sim/cpu.py): by default each
sim run gets as many background jobs as the real run of its seed measured other tenants using
(report.json `host_load.background_cores`, harness/machinery/hostload.py), so both run under the same
conditions; a number gives every sim run that many, 0 an idle host. Each sim run's figure is in
validate.json (`background`). Likewise `--host-slowdown auto` (the default) slows each sim run's
cores by what the host's speed probe read during its real run against what it read during the
calibration's runs (harness/machinery/hostspeed.py: the same seeds took 182 to 228 acked pushes/s on this
host as its cores' speed moved); a number gives every sim run that factor, 1 the calibration's
speed. Each sim run's factor is in validate.json (`host_slowdown`).
Targets (issue 8): failover p50 within 10%, p99 within 20%, throughput within 10%, catch-up bytes
within 5%; the migration figures are reported, not targeted. A scenario with a run that did not
pass is not judged (the others are); a metric that errs the same way on every scenario is named
(`one_sided`). Exit 0 when every target holds, 1 when one does not, 3 when a run gave no
evidence. `--scenario` runs some of the set only.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from pschaos.harness.errors import HarnessError
from pschaos.harness.history.events import read_events
from pschaos.harness.machinery.hostspeed import identity, slowdown
from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.backends.sim.calibration import Calibration
from pschaos.harness.proof.twin.runs import run_one
from pschaos.harness.proof.twin.measured import measured_background, measured_probe, probe_why
from pschaos.harness.backends.sim.handoff_phases import PHASES, call_latency, handoff_phases, median_phases
from pschaos.harness.run import library

# each scenario and the targeted metrics it must produce on both backends (missing = the target fails)
SCENARIOS = {"kill-primary": ("failover_p50_ms", "failover_p99_ms", "acked_per_s", "catchup_bytes"),
             "replica-restart-catchup": ("acked_per_s", "catchup_bytes"),
             "async-kill-primary": ("failover_p50_ms", "failover_p99_ms", "acked_per_s", "catchup_bytes"),
             "ssp-kill-primary": ("failover_p50_ms", "failover_p99_ms", "acked_per_s"),
             "scale-out-shards": ("acked_per_s",),
             "scale-in-shards": ("acked_per_s",)}
MIGRATION = ("migration_unavailable_p50_ms", "migration_bytes_ratio", "keys_moved_fraction",
             *(f"handoff_{p}_ms" for p in PHASES if p != "unavailable"))
CALLS = ("push_p50_ms", "pull_p50_ms")
TARGETS = {"failover_p50_ms": 0.10, "failover_p99_ms": 0.20, "acked_per_s": 0.10, "catchup_bytes": 0.05}


def _pct(xs: list[float], q: float) -> float | None:
    xs = sorted(x for x in xs if x != float("inf"))
    if not xs:
        return None
    k = min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))
    return xs[k]


def observe(run_dir: Path) -> dict:
    """The figures validate compares, from one run's report.json and history.jsonl."""
    rep = json.loads((run_dir / "report.json").read_text())
    hist = read_events(run_dir / "history.jsonl")
    oks = [e["t"] for e in hist if e["f"] == "push" and e["type"] == "ok"]
    span = (max(oks) - min(oks)) if len(oks) > 1 else 0.0
    syncs = [e["value"] for e in hist if e["f"] == "sync"]
    prim: dict[tuple[int, int], int] = {}
    lags = []
    for e in hist:
        if e["f"] == "sample":
            v = e["value"]
            if v["role"] == "primary":
                prim[(v["tick"], v["shard"])] = v["seq"]
    for e in hist:
        if e["f"] == "sample" and e["value"]["role"] == "replica":
            v = e["value"]
            p = prim.get((v["tick"], v["shard"]))
            if p is not None:
                lags.append(max(0, p - v["seq"]))
    m = rep["metrics"]
    return {"verdict": rep["verdict"], "failover_ms": [f["ms"] for f in rep.get("failover_times") or []],
            "migration_unavailable_p50_ms": (m.get("migration_unavailable_ms") or {}).get("p50"),
            "migration_bytes_ratio": m.get("migration_bytes_ratio"), "keys_moved_fraction": m.get("keys_moved_fraction"),
            "acked_per_s": (len(oks) / span) if span > 0 else None,
            "catchup_bytes": sum(s.get("bytes", 0) for s in syncs) if syncs else None,
            "catchup_s": sum(s.get("duration_s", 0.0) for s in syncs) if syncs else None,
            "lag": statistics.mean(lags) if lags else None,
            "ssp_lead": ((rep["checks"].get("staleness") or {}).get("details") or {}).get("max_lead"),
            "final_loss": rep["metrics"].get("final_loss"), "wall_s": rep.get("wall_s"),
            "handoff": handoff_phases(hist), **call_latency(hist)}


def pooled(runs: list[dict]) -> dict:
    def mean(key: str) -> float | None:
        xs = [r[key] for r in runs if r.get(key) is not None]
        return statistics.mean(xs) if xs else None
    fo = [ms for r in runs for ms in (r["failover_ms"] or []) if isinstance(ms, (int, float))]
    unavailable = [r["migration_unavailable_p50_ms"] for r in runs if r.get("migration_unavailable_p50_ms") is not None]
    losses = [r["final_loss"] for r in runs if r.get("final_loss") is not None]
    return {"failover_p50_ms": _pct(fo, 0.5), "failover_p99_ms": _pct(fo, 0.99), "acked_per_s": mean("acked_per_s"),
            "catchup_bytes": mean("catchup_bytes"), "catchup_s": mean("catchup_s"), "replication_lag": mean("lag"),
            "ssp_max_lead": mean("ssp_lead"), "final_loss": mean("final_loss"), "final_loss_band": [min(losses), max(losses)] if losses else None,
            "failovers": len(fo), "migration_unavailable_p50_ms": _pct(unavailable, 0.5),
            "migration_bytes_ratio": mean("migration_bytes_ratio"), "keys_moved_fraction": mean("keys_moved_fraction"),
            **{f"handoff_{p}_ms": v for p, v in median_phases([r.get("handoff") or [] for r in runs]).items()
               if p != "unavailable"},
            **{k: _pct([r[k] for r in runs if r.get(k) is not None], 0.5) for k in CALLS}}


def compare(real: dict, sim: dict, targeted: tuple[str, ...] = ()) -> dict:
    """Per metric: measured, predicted, relative error; `holds` for a targeted metric is False when
    either side has no value (no evidence is never a pass), None for an informational one."""
    out = {}
    for k in ("failover_p50_ms", "failover_p99_ms", "acked_per_s", "catchup_bytes", "catchup_s", "replication_lag",
              "ssp_max_lead", *CALLS, *MIGRATION):
        m, p = real.get(k), sim.get(k)
        if k in MIGRATION and m is None and p is None:
            continue                      # a scenario without migrations
        err = abs(p - m) / abs(m) if m not in (None, 0) and p is not None else None
        target = TARGETS.get(k) if k in targeted else None
        out[k] = {"measured": m, "predicted": p, "rel_error": err, "target": target,
                  "holds": None if target is None else (err is not None and err <= target)}
    band, p = real.get("final_loss_band"), sim.get("final_loss")
    holds = None if band is None or p is None else band[0] * 0.9 <= p <= band[1] * 1.1
    out["final_loss"] = {"measured_band": band, "predicted": p, "holds": holds}
    return out


def judge(result: dict, not_passed: list[str]) -> None:
    """Judge the targets in place. A scenario with a run that did not pass is no evidence of its
    timings: its targets are not judged (`holds` None, the scenario's `not_judged` says why), and
    the other scenarios' are. `targets` counts what held of what was judged; `all_targets_hold` is
    None unless every target was judged. `one_sided` names each targeted metric that errs the same
    way on every scenario that has it (two or more): a model that is off in one direction
    everywhere, even when each error is within its target."""
    total = held = judged = 0
    signs: dict[str, list[tuple[str, float]]] = {}
    for name, sc_ in result["scenarios"].items():
        why = [r for r in not_passed if r.startswith(f"{name} seed ")]
        if why:
            sc_["not_judged"] = why
        for k, c in sc_["compare"].items():
            if why:
                c["holds"] = None            # the final-loss band too: no evidence from this scenario
            if c.get("target") is None:
                continue
            total += 1
            if why:
                continue
            judged += 1
            held += bool(c["holds"])
            m, p = c.get("measured"), c.get("predicted")
            if m not in (None, 0) and p is not None:
                signs.setdefault(k, []).append((name, (p - m) / abs(m)))
    result["targets"] = {"held": held, "judged": judged, "total": total}
    result["all_targets_hold"] = (held == judged) if judged and judged == total else None
    result["one_sided"] = {k: ("high" if v[0][1] > 0 else "low", [n for n, _ in v]) for k, v in signs.items()
                           if len(v) >= 2 and (all(e > 0 for _, e in v) or all(e < 0 for _, e in v))}
    if not_passed:
        result["unknown_reasons"] = not_passed


def _auto_or(arg: str, flag: str, ok, want: str) -> float | None:
    """A validate option that is `auto` (None: read from each real run) or a finite number `ok` takes."""
    if arg == "auto":
        return None
    try:
        v = float(arg)
    except ValueError:
        v = float("nan")
    if not (ok(v) and v != float("inf")):
        raise ValueError(f"{flag}={arg!r}: give auto, or {want}")
    return v


def background_of(arg: str) -> float | None:
    """`--background`: None for auto (each real run's measured load), else a number of jobs >= 0."""
    return _auto_or(arg, "--background", lambda v: v >= 0, "a number of background jobs >= 0 (0: an idle host)")


def no_probe_reason(cal: Calibration) -> str | None:
    """Why this calibration's probe baseline cannot correct this host's runs, or None when it can:
    none recorded, or read with another loop, period or interpreter (hostspeed.identity)."""
    if not cal.host_probe_ms:
        return (f"the calibration {cal.path} has no host_probe_ms (measured before harness/machinery/hostspeed.py, or no "
                "training window held a sample); calibrate again to correct for the host's speed")
    theirs, ours = cal.measured.get("probe"), identity()
    if theirs != ours:
        return (f"the calibration's host probe was read as {theirs}, this one reads as {ours}: the two figures "
                "are not comparable; calibrate again on this interpreter")
    return None


def slowdown_of(arg: str) -> float | None:
    """`--host-slowdown`: None for auto (each real run's probe against the calibration's), else a factor > 0."""
    return _auto_or(arg, "--host-slowdown", lambda v: v > 0,
                    "a factor > 0 (1: the host as fast as when the calibration was measured)")


def _run(path: Path, backend: str, seed: int, out: Path, cal: str | None, background: float = 0.0,
         slowdown: float = 1.0) -> Path:
    return run_one(path, backend, seed, out, cal, background, slowdown)


def _observed(d: Path, name: str, seed: int, backend: str, not_passed: list[str]) -> dict:
    obs = observe(d)
    if obs["verdict"] != "pass":     # a failed or unknown run is no evidence of its timings
        not_passed.append(f"{name} seed {seed} on {backend}: {obs['verdict']}")
    return obs


def _twins(path: Path, twins: list[tuple[int, float, float]], out: Path, args: argparse.Namespace,
           t0: float) -> list[Path]:
    """The twin runs, one per (seed, background, host slowdown), here or as Ray tasks (`--on`):
    their folders, in that order (twin_on_ray.py)."""
    for seed, background, slow in twins:
        print(f"pschaos sim validate: {path.stem} seed {seed} on sim ({time.time() - t0:.0f}s, background "
              f"{background:.2f} jobs, host slowdown {slow:.3f})" + (" as a Ray task" if args.on else ""),
              file=sys.stderr, flush=True)
    if not getattr(args, "on", None):
        return [_run(path, "sim", seed, out, args.calibration, background, slow) for seed, background, slow in twins]
    from pschaos.harness.proof.twin.twin_on_ray import twins_on_ray

    return twins_on_ray(args.pool, path, twins, out, args.calibration)


def validate_main(args: argparse.Namespace) -> int:
    """`pschaos sim validate`; with `--on ray`, inside a pool held for the whole comparison."""
    from pschaos.harness.fanout.ray_runs import RayPool, parse_on

    on = parse_on(getattr(args, "on", None))
    if isinstance(on, str):
        print(f"pschaos sim validate: {on}", file=sys.stderr)
        return 2
    if not on[0]:
        args.on = None
        return _validate(args)
    try:
        with RayPool(on[1], 2, "sim", lambda m: print(f"pschaos sim validate: {m}", file=sys.stderr, flush=True)) as pool:
            args.pool = pool
            return _validate(args)
    except HarnessError as e:
        print(f"pschaos sim validate: {e}", file=sys.stderr)
        return 2


def _validate(args: argparse.Namespace) -> int:
    out = Path(args.out)
    seeds = range(1, args.seeds + 1)
    if args.seeds < 1:
        print(f"pschaos sim validate: --seeds={args.seeds}; give at least 1 (the targets ask for 5)", file=sys.stderr)
        return 2
    unknown_names = sorted(set(getattr(args, "scenario", None) or ()) - set(SCENARIOS))
    if unknown_names:
        print(f"pschaos sim validate: --scenario {', '.join(unknown_names)}: not in the set; use one of "
              f"{', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    try:
        fixed = background_of(str(getattr(args, "background", "auto")))
        fixed_slow = slowdown_of(str(getattr(args, "host_slowdown", "auto")))
    except ValueError as e:
        print(f"pschaos sim validate: {e}", file=sys.stderr)
        return 2
    if getattr(args, "calibrate", False):
        if args.calibration:
            print("pschaos sim validate: --calibrate measures its own calibration; drop --calibration or --calibrate",
                  file=sys.stderr)
            return 2
        from pschaos.harness.proof.twin.calibrate import calibrate

        cal_path = out / "calibration.json"
        calibrate(cal_path, say=lambda m: print(m, file=sys.stderr, flush=True))
        args.calibration = str(cal_path)
    result: dict = {"seeds": list(seeds), "scenarios": {}, "calibration": args.calibration or "default"}
    try:
        cal = Calibration.load(args.calibration) if args.calibration else Calibration.default()
    except HarnessError as e:
        print(f"pschaos sim validate: {e}", file=sys.stderr)
        return 2
    probe_off = None if fixed_slow is not None else no_probe_reason(cal)
    notes: list[str] = []
    if probe_off:
        notes.append(f"{probe_off}: every twin ran at the calibration's speed (--host-slowdown 1)")
        print(f"pschaos sim validate: {notes[-1]}", file=sys.stderr)
    else:
        result["calibration_probe_ms"] = cal.host_probe_ms    # the baselines the factors were read against
    t0 = time.time()
    not_passed: list[str] = []
    for name, targeted in SCENARIOS.items():
        if getattr(args, "scenario", None) and name not in args.scenario:
            continue
        path = library.path_of(name)
        runs: dict[str, list[dict]] = {"process": [], "sim": []}
        backgrounds, slowdowns = [], []
        sc = load_scenario(path)
        cal_probe = cal.probe_ms(sc.cluster.model, sc.cluster.replication, sc.cluster.training)
        if fixed_slow is None and not probe_off and cal_probe is None:
            notes.append(f"{name}: the calibration has no host probe for its kind of run ({sc.cluster.model}, "
                         f"{sc.cluster.replication} replication, {sc.cluster.training} training); its twins ran at "
                         "the calibration's speed")
            print(f"pschaos sim validate: {notes[-1]}", file=sys.stderr, flush=True)
        twins: list[tuple[int, float, float]] = []        # the real runs first: each twin needs its seed's figures
        for seed in seeds:
            print(f"pschaos sim validate: {name} seed {seed} on process ({time.time() - t0:.0f}s)", file=sys.stderr,
                  flush=True)
            d = _run(path, "process", seed, out, args.calibration)
            background = measured_background(d) if fixed is None else fixed
            backgrounds.append(background)
            measured = None if fixed_slow is not None or probe_off else slowdown(measured_probe(d), cal_probe)
            if fixed_slow is None and not probe_off and cal_probe is not None and measured is None:
                # no evidence of the host's speed in this run: no correction, said
                notes.append(f"{name} seed {seed}: its real run read no host speed ({probe_why(d)}); "
                             "its twin ran at the calibration's speed")
                print(f"pschaos sim validate: {notes[-1]}", file=sys.stderr, flush=True)
            slowdowns.append(measured if fixed_slow is None else fixed_slow)
            twins.append((seed, background, fixed_slow if fixed_slow is not None else (measured or 1.0)))
            runs["process"].append(_observed(d, name, seed, "process", not_passed))
        for seed, d in zip(seeds, _twins(path, twins, out, args, t0)):
            runs["sim"].append(_observed(d, name, seed, "sim", not_passed))
        real, sim = pooled(runs["process"]), pooled(runs["sim"])
        wall = {b: sum(r["wall_s"] or 0 for r in rs) for b, rs in runs.items()}
        result["scenarios"][name] = {"real": real, "sim": sim, "compare": compare(real, sim, targeted), "wall_s": wall,
                                     "verdicts": {b: [r["verdict"] for r in rs] for b, rs in runs.items()},
                                     "background": backgrounds, "host_slowdown": slowdowns}
    judge(result, not_passed)
    if notes:
        result["notes"] = notes
    out.mkdir(parents=True, exist_ok=True)
    (out / "validate.json").write_text(json.dumps(result, indent=2))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    if not_passed:
        return 3
    return 0 if result["all_targets_hold"] else 1


def _print(result: dict) -> None:
    for name, s in result["scenarios"].items():
        print(f"\n{name} (seeds {result['seeds']}): real {s['verdicts']['process']}, sim {s['verdicts']['sim']}; "
              f"wall {s['wall_s']['process']:.0f}s real, {s['wall_s']['sim']:.0f}s sim")
        print(f"  {'metric':28} {'measured':>12} {'predicted':>12} {'rel.err':>8} {'target':>7}  ok")
        for k, c in s["compare"].items():
            if k == "final_loss":
                print(f"  {k:28} {str(c['measured_band']):>12} {c['predicted']!s:>12} {'':>8} {'band':>7}  {c['holds']}")
                continue
            f = (lambda v: "-" if v is None else f"{v:.4g}")
            err = "-" if c["rel_error"] is None else f"{100 * c['rel_error']:.1f}%"
            tgt = "-" if c["target"] is None else f"{100 * c['target']:.0f}%"
            print(f"  {k:28} {f(c['measured']):>12} {f(c['predicted']):>12} {err:>8} {tgt:>7}  {c['holds']}")
    for why in result.get("unknown_reasons", []):
        print(f"not judged: {why}")
    t = result.get("targets") or {}
    if t:
        print(f"\ntargets held: {t['held']} of {t['total']}" + (f" ({t['total'] - t['judged']} not judged)"
                                                              if t["judged"] < t["total"] else ""))
    for k, (way, names) in (result.get("one_sided") or {}).items():
        print(f"one-sided: {k} errs {way} on every scenario that has it ({', '.join(names)})")
    print(f"all targets hold: {result['all_targets_hold']}")


__all__ = ["background_of", "judge", "no_probe_reason", "observe", "slowdown_of", "validate_main"]
