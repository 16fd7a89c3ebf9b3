"""`pschaos soak SCENARIO --seeds N [-n PAR]`: one scenario over many seeds, as a reliability figure.

A single green run says little about a chaos scenario: the nemesis and the thread timing change
with the seed. Soak runs `pschaos run SCENARIO --seed S --quiet` for N seeds (PAR at a time, each
a process in its own session, so one crash or hang costs one run, not the soak; on the sim
backend forked from a warm process, harness/proof/soak/fork.py), optionally
each seed K times (`--repeat`), and aggregates the report.json files: pass rate, verdict counts,
lost acknowledged updates in total and per seed, failover p50/p99 pooled across runs, flaky seeds
(a seed that both passes and fails). Fail closed: a run without a report.json (crash, timeout) is
`unknown`, never skipped, a failover that never completed counts as +inf, never dropped, and a
count (lost acknowledged updates, spurious failovers) in total or for a seed is None, printed as
unknown, when a run in it has no figure: never the 0 of the runs that had one.
Writes soak.json, plus `pschaos report`'s aggregate.json / report.html / summary.md of the runs.
Exit code: 0 all pass, 1 any fail, 3 any unknown and no fail, 2 bad input.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pschaos.reports.totals import figure, total, unknown_total, without

from pschaos.harness.run.metrics import failover_stats
from pschaos.harness.proof.soak.fork import CLI_MODULE, ForkedRun
from pschaos.harness.fanout.ray_runs import parse_on  # noqa: F401 - soak's --on, and its users
from pschaos.harness.machinery.procs import interrupt_group
from pschaos.harness.machinery.tools import CHECKOUT, REPO
from pschaos.harness.run import library

SCHEMA = "pschaos.soak/1"
INTERRUPT_GRACE_S = 60.0      # a run sent SIGINT gets this long to tear down before SIGKILL


@dataclass
class RunResult:
    """One `pschaos run` of the soak: its verdict comes from its report.json or, lacking one, is unknown."""
    seed: int
    repeat: int
    dir: Path
    rc: int | None = None
    wall_s: float = 0.0
    timed_out: bool = False
    report: dict | None = None
    reason: str | None = None
    verdict: str = field(default="unknown")
    where: str = ""              # the Ray node that ran it (--on ray); "" here


def judge_run(r: RunResult) -> RunResult:
    """Read the run's report.json and set its verdict; fail closed when there is none or it is unreadable."""
    path = r.dir / "report.json"
    try:
        r.report = json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError) as e:
        r.report, r.reason = None, f"unreadable report.json: {e}"
    if r.timed_out:
        r.verdict = "unknown"
        r.reason = f"timed out after {r.wall_s:.0f} s; interrupted (see {r.dir / 'soak-run.log'})"
    elif r.report is None:
        r.verdict = "unknown"
        r.reason = r.reason or f"no report.json (exit code {r.rc}; see {r.dir / 'soak-run.log'})"
    else:
        v = r.report.get("verdict")
        r.verdict = v if v in ("pass", "fail", "unknown") else "unknown"
        if r.verdict != "pass":
            bad = [n for n, c in r.report.get("checks", {}).items() if c.get("valid") is not True]
            r.reason = f"checks not passed: {', '.join(bad) or 'none named'}"
    return r


def aggregate(scenario: str, runs: list[RunResult]) -> dict:
    """The soak figure from judged runs (pure: unit-tested on fake report.json files)."""
    counts = {v: sum(r.verdict == v for r in runs) for v in ("pass", "fail", "unknown")}
    by_seed: dict[int, list[RunResult]] = {}
    for r in runs:
        by_seed.setdefault(r.seed, []).append(r)
    fo = [f.get("ms") for r in runs if r.report for f in r.report.get("failover_times", [])]
    moved = [ms for r in runs for ms in (r.report or {}).get("metrics", {}).get("migration_unavailable_samples_ms") or []]
    switches = sum((r.report or {}).get("metrics", {}).get("migrations") or 0 for r in runs)
    acked = [(r.report or {}).get("metrics", {}).get("acked_updates") for r in runs]
    flaky = sorted(s for s, rs in by_seed.items() if {"pass", "fail"} <= {r.verdict for r in rs})
    return {
        "schema": SCHEMA, "scenario": scenario, "runs": len(runs), "seeds": len(by_seed),
        "repeat": max((r.repeat for r in runs), default=0),
        "verdicts": counts, "pass_rate": round(counts["pass"] / len(runs), 4) if runs else None,
        "lost_acked_updates": _count(by_seed, "lost_acked_updates", "seeds_with_loss"),
        "acked_updates": sum(a for a in acked if a is not None),
        # promotions while the old primary was alive and reachable (harness/checkers/spurious.py)
        "spurious_failovers": _count(by_seed, "spurious_failovers", "seeds_with_spurious"),
        "failover_ms": failover_stats(fo),
        # shard migrations: how long the moved keys could not be written, pooled over every run's
        # migrations (fence to the first ack of a moved key at the new routing epoch)
        "migrations": switches,
        "migration_unavailable_ms": failover_stats(moved) if moved else None,
        "migration_unavailable_unobserved": switches - len(moved),
        "flaky_seeds": flaky,
        "per_seed": {str(s): [r.verdict for r in rs] for s, rs in sorted(by_seed.items())},
        "failing": [_brief(r) for r in runs if r.verdict == "fail"],
        "unknown": [_brief(r) for r in runs if r.verdict == "unknown"],
        "wall_s": round(sum(r.wall_s for r in runs), 1),
        # --on ray: the node each run ran on (the same seeds give the same verdicts wherever they ran)
        **({"ray_nodes": {str(r.dir.name): r.where for r in runs if r.where}} if any(r.where for r in runs) else {}),
    }


def _count(by_seed: dict[int, list[RunResult]], metric: str, seeds_with: str) -> dict:
    """A per-run count over the soak: per seed the sum of its repeats, and the whole sum; either is
    None when a run in it has no figure (reports/totals.py: a 0 over the judged runs alone would
    read as a pass). `seeds_with` lists the seeds where some run counted one or more."""
    vals = {seed: [(r.report or {}).get("metrics", {}).get(metric) for r in rs] for seed, rs in sorted(by_seed.items())}
    every = [v for vs in vals.values() for v in vs]
    return {"sum": total(every), "per_seed": {str(seed): total(vs) for seed, vs in vals.items()},
            seeds_with: [seed for seed, vs in vals.items() if any(figure(v) for v in vs)],
            "sum_of_known": sum(figure(v) or 0 for v in every), "runs_without_figure": without(every)}


def _count_line(c: dict, what: str, seeds_label: str, seeds_with: str) -> str:
    """One summary line: the sum, or unknown with how many runs lack a figure (and the known part)."""
    head = (f"{c['sum']} in total" if c["sum"] is not None
            else f"{unknown_total(c['runs_without_figure'])} (at least {c['sum_of_known']} in the others)")
    return f"  {what}: {head}; {seeds_label}: {', '.join(map(str, c[seeds_with])) or 'none'}"


def _brief(r: RunResult) -> dict:
    return {"seed": r.seed, "repeat": r.repeat, "dir": str(r.dir), "reason": r.reason,
            "rerun": (r.report or {}).get("rerun"), **({"ray_node": r.where} if r.where else {})}


def exit_code(agg: dict) -> int:
    v = agg["verdicts"]
    return 1 if v["fail"] else 3 if v["unknown"] else 0


def summary(agg: dict, out: Path) -> str:
    v, lost, fo = agg["verdicts"], agg["lost_acked_updates"], agg["failover_ms"]
    lines = [f"pschaos soak {agg['scenario']}: {v['pass']}/{agg['runs']} runs passed (pass rate {agg['pass_rate']}) "
             f"over {agg['seeds']} seed(s) x {agg['repeat']}; fail {v['fail']}, unknown {v['unknown']}",
             _count_line(lost, "lost acknowledged updates", "seeds with loss", "seeds_with_loss"),
             _count_line(agg["spurious_failovers"], "spurious failovers (old primary alive and reachable)",
                         "seeds with one", "seeds_with_spurious"),
             f"  failover ms over {fo['n']} failover(s) ({fo['failed']} never completed, counted as inf): "
             f"p50 {fo['p50']} p99 {fo['p99']} max {fo['max']}",
             *([f"  moved keys unavailable for writes over {agg['migrations']} migration(s): p50 "
                f"{mu['p50']} p99 {mu['p99']} max {mu['max']} ms"
                + (f"; {agg['migration_unavailable_unobserved']} with no ack observed"
                   if agg["migration_unavailable_unobserved"] else "")]
              if (mu := agg.get("migration_unavailable_ms")) else []),
             f"  flaky seeds (pass and fail): {', '.join(map(str, agg['flaky_seeds'])) or 'none'}"]
    for kind in ("failing", "unknown"):
        for b in agg[kind]:
            lines.append(f"  {kind} seed {b['seed']}"
                         + (f" (repeat {b['repeat']})" if agg["repeat"] > 1 else "")
                         + f": {b['reason']}" + (f"; rerun: {b['rerun']}" if b["rerun"] else ""))
    lines.append(f"  -> {out / 'soak.json'}, {out / 'report.html'}")
    return "\n".join(lines)


def _run_dir(out: Path, seed: int, repeat: int, repeats: int) -> Path:
    return out / (f"seed-{seed}" if repeats == 1 else f"seed-{seed}-r{repeat}")


def _command(scenario: Path, seed: int, backend: str, d: Path) -> list[str]:
    return [sys.executable, "-m", CLI_MODULE, "run", str(scenario), "--backend", backend,
            "--seed", str(seed), "--out", str(d), "--quiet"]


def _stop(p: subprocess.Popen | ForkedRun, grace: float = INTERRUPT_GRACE_S) -> None:
    """SIGINT (the harness tears its cluster down), then SIGKILL of the group if it hangs."""
    interrupt_group(p, grace)


def execute(scenario: Path, plan: list[tuple[int, int]], out: Path, par: int, backend: str, repeats: int,
            timeout_s: float, progress=lambda msg: None) -> list[RunResult]:
    """Run the plan PAR at a time; each run in its own session so a Ctrl-C here is forwarded once."""
    env = dict(os.environ)
    if CHECKOUT:       # the runs import this same code (a mutant's copy included); an installed pschaos is found as is
        env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    pending = list(plan)
    running: list[tuple[RunResult, subprocess.Popen | ForkedRun, float]] = []
    done: list[RunResult] = []
    try:
        while pending or running:
            while pending and len(running) < par:
                seed, k = pending.pop(0)
                d = _run_dir(out, seed, k, repeats)
                d.mkdir(parents=True, exist_ok=True)
                (d / "report.json").unlink(missing_ok=True)          # never read a stale verdict
                argv = _command(scenario, seed, backend, d)
                if backend == "sim":         # warm forks: see harness/proof/soak/fork.py
                    (d / "soak-run.log").write_bytes(b"")
                    p = ForkedRun(argv[3:], d / "soak-run.log")
                else:
                    with open(d / "soak-run.log", "wb") as log:
                        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                             start_new_session=True)
                running.append((RunResult(seed, k, d), p, time.monotonic()))
            time.sleep(0.2)
            for item in list(running):
                r, p, t0 = item
                if p.poll() is None and time.monotonic() - t0 < timeout_s:
                    continue
                if p.returncode is None:
                    r.timed_out = True
                    _stop(p)
                running.remove(item)
                r.rc, r.wall_s = p.returncode, round(time.monotonic() - t0, 1)
                done.append(judge_run(r))
                lost = (r.report or {}).get("metrics", {}).get("lost_acked_updates")
                progress(f"{len(done)}/{len(plan)} seed={r.seed}" + (f" r{r.repeat}" if repeats > 1 else "")
                         + f" {r.verdict.upper()} lost={lost} ({r.wall_s:.0f} s)"
                         + (f": {r.reason}" if r.reason and r.verdict != "pass" else ""))
    except KeyboardInterrupt:
        for _, p, _ in running:
            _stop(p)
        raise
    return sorted(done, key=lambda r: (r.seed, r.repeat))


def resolve_scenario(name: str) -> Path:
    """A path, or a library name (`nemesis-soak` -> the library's nemesis-soak.yaml)."""
    return library.resolve(name)


def soak(args: argparse.Namespace) -> int:
    from pschaos.reports.aggregate import aggregate as runs_aggregate
    from pschaos.reports.aggregate import write as write_runs

    from pschaos.harness.run.scenario import load_scenario

    for flag, val in (("--seeds", args.seeds), ("-j", args.par), ("--repeat", args.repeat)):
        if val < 1:
            print(f"pschaos soak: {flag} {val}: must be at least 1", file=sys.stderr)
            return 2
    if args.timeout <= 0:
        print(f"pschaos soak: --timeout {args.timeout}: must be positive (seconds per run)", file=sys.stderr)
        return 2
    on = parse_on(getattr(args, "on", None))
    if not isinstance(on, str) and on[0] and args.backend == "docker":
        on = ("--on ray runs the sim and process backends: a docker run needs the engine and the image on "
              "every node; run it here without --on")
    if isinstance(on, str):
        print(f"pschaos soak: {on}", file=sys.stderr)
        return 2
    path = resolve_scenario(args.scenario)
    sc = load_scenario(path)            # a bad file exits 2 (ScenarioError) before any run starts
    out = Path(args.out) if args.out else Path("out") / f"soak-{sc.name}"
    plan = [(s, k) for s in range(args.first_seed, args.first_seed + args.seeds) for k in range(1, args.repeat + 1)]

    def progress(msg: str) -> None:
        print(f"[soak] {msg}", file=sys.stderr, flush=True)

    progress(f"{sc.name}: {len(plan)} run(s), seeds {args.first_seed}..{args.first_seed + args.seeds - 1}"
             f" x {args.repeat}, {args.par} at a time -> {out}")
    if on[0]:
        from pschaos.harness.fanout.ray_runs import execute_on_ray
        runs = sorted(execute_on_ray(path.resolve(), plan, lambda s, k: _run_dir(out, s, k, args.repeat), args.backend,
                                     args.timeout, on[1], args.par, RunResult, judge_run, progress,
                                     lambda s, d: " ".join(["pschaos", *_command(path, s, args.backend, d)[3:-1]])),
                      key=lambda r: (r.seed, r.repeat))
    else:
        runs = execute(path.resolve(), plan, out, args.par, args.backend, args.repeat, args.timeout, progress)
    agg = aggregate(sc.name, runs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.json").write_text(json.dumps(agg, indent=2))
    # the HTML counts every run: one without a report.json stands in as unknown, not left out
    stand_in = {"scenario": sc.name, "backend": args.backend, "verdict": "unknown", "faults": [], "metrics": {}}
    write_runs(runs_aggregate([(r.dir / "report.json", r.report or {**stand_in, "seed": r.seed,
                                                                      "rerun": " ".join(_command(path, r.seed, args.backend, r.dir))})
                               for r in runs]), out)
    if getattr(args, "json", False):        # the aggregate soak.json holds, with its exit code, for a machine
        print(json.dumps({"exit": exit_code(agg), "soak": str(out / "soak.json"), **agg}, default=str))
    else:
        print(summary(agg, out))
    return exit_code(agg)
