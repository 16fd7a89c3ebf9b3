"""`pschaos run` and `pschaos check`: run scenarios and judge them, or judge saved histories again.

A scenario is a YAML file, or the name of one in the scenario library (`pschaos run kill-primary`).
Exit codes as everywhere: 0 pass, 1 a check failed, 2 bad input, 3 unknown; `--json` prints one
report line per run for a machine to read.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def add_parsers(sub) -> None:
    """The `run` and `check` verbs on the command line's subparsers."""
    r = sub.add_parser("run", help="run scenario files and judge them")
    r.add_argument("scenario", nargs="+", help="scenario YAML file(s), or library scenarios by name (kill-primary)")
    r.add_argument("--backend", default="process", choices=["process", "docker", "sim"])
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--out", help="output folder (default out/<scenario>-<seed>)")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--json", action="store_true", help="one JSON object a run on stdout (verdict, exit code, report)")
    r.add_argument("--keep-data", action="store_true", help="keep node data and checkpoints (run/work) after the run")
    r.add_argument("--calibration", help="with --backend sim: the calibration file (default: the committed one)")
    r.add_argument("--background", type=float,
                   help="with --backend sim: other tenants' runnable jobs on the twin's cores (default 0)")
    r.add_argument("--host-slowdown", type=slowdown_arg, metavar="FACTOR",
                   help="with --backend sim: the host's cores this many times slower than when the calibration was "
                        "measured (default 1; harness/machinery/hostspeed.py)")
    r.set_defaults(fn=cmd_run)

    ck = sub.add_parser("check", help="re-judge saved histories offline (exit 0 pass, 1 fail, 3 unknown)")
    ck.add_argument("history", nargs="+", help="a run's history.jsonl, or its folder")
    ck.add_argument("--json", action="store_true", help="one JSON object per history")
    ck.set_defaults(fn=cmd_check)


def cmd_run(args: argparse.Namespace) -> int:
    from pschaos.harness.run.judge import EXIT_CODES
    from pschaos.harness.run.runner import Runner, default_out
    from pschaos.harness.run.scenario import load_scenario

    codes = []
    make = None
    if args.calibration is not None or args.background is not None or args.host_slowdown is not None:
        if args.backend != "sim":
            print("pschaos run: --calibration, --background and --host-slowdown are the twin's; add --backend sim",
                  file=sys.stderr)
            return 2
        if args.background is not None and not (math.isfinite(args.background) and args.background >= 0):
            print(f"pschaos run: --background={args.background}: give a number of jobs >= 0 (0: an idle host)",
                  file=sys.stderr)
            return 2
        from pschaos.harness.backends.sim.backend import sim_factory

        make = sim_factory(args.calibration, args.background or 0.0,
                           1.0 if args.host_slowdown is None else args.host_slowdown)
    from pschaos.harness.run import library

    scenarios = [load_scenario(library.resolve(p)) for p in args.scenario]   # validate all before running any
    for sc in scenarios:
        out = Path(args.out) if args.out and len(scenarios) == 1 else (
            Path(args.out) / sc.name if args.out else default_out(sc, args.seed))
        rep = Runner(sc, args.seed, out, args.backend, quiet=args.quiet, keep_data=args.keep_data,
                     make_backend=make).run()
        codes.append(EXIT_CODES[rep["verdict"]])
        if args.json:      # one object a line, for a machine; the progress stays on stderr
            print(json.dumps({"scenario": rep["scenario"], "seed": rep["seed"], "backend": rep["backend"],
                              "verdict": rep["verdict"], "exit": codes[-1], "report": str(out / "report.json"),
                              "rerun": rep["rerun"], "failed_checks": sorted(k for k, c in rep["checks"].items()
                                                                             if c["valid"] is not True),
                              "metrics": {k: rep["metrics"].get(k) for k in ("acked_updates", "lost_acked_updates",
                                                                             "failovers", "final_loss")}}))
            continue
        print(summary_line(rep, out))
        print_not_passed(rep["checks"])
        if rep["verdict"] != "pass":
            print(f"  rerun: {rep['rerun']}")
    return worst_exit(codes)


def slowdown_arg(text: str) -> float:
    """`pschaos run --host-slowdown`: a factor > 0 (validate's `auto` reads each real run's probe;
    a single run has none to read)."""
    try:
        f = float(text)
    except ValueError:
        f = float("nan")
    if not (math.isfinite(f) and f > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a factor > 0 (1: the host as fast as when the calibration "
                                         "was measured; auto is `pschaos sim validate`'s, which reads each real run)")
    return f


def worst_exit(codes: list[int]) -> int:
    """1 when anything failed, else 3 when anything was unknown, else 0."""
    return 1 if 1 in codes else 3 if 3 in codes else 0


def print_not_passed(checks: dict) -> None:
    for name, c in checks.items():
        if c["valid"] is not True:
            print(f"  {name}: {c['valid']}  {json.dumps(c['details'], default=str)[:600]}")


def cmd_check(args: argparse.Namespace) -> int:
    """Re-judge saved histories offline: the same checkers, the same verdicts as the run."""
    from pschaos.harness.run.judge import EXIT_CODES, judge_file

    codes = []
    for p in args.history:
        j = judge_file(Path(p))
        checks = {k: v.to_json() for k, v in j.checks.items()}
        if args.json:
            print(json.dumps({"history": p, "verdict": j.verdict, "checks": checks, "metrics": j.metrics},
                             default=str))
        else:
            print(f"{j.verdict.upper()} {p}: " + " ".join(f"{k}={v['valid']}" for k, v in checks.items()))
            print_not_passed(checks)
        codes.append(EXIT_CODES[j.verdict])
    return worst_exit(codes)


def summary_line(rep: dict, out: Path) -> str:
    m = rep["metrics"]
    fo = m["failover_ms"]
    return (f"{rep['verdict'].upper()} {rep['scenario']} seed={rep['seed']} acked={m['acked_updates']} "
            f"lost={m['lost_acked_updates']} failovers={m['failovers']} failover_ms p50={fo['p50']} "
            f"p99={fo['p99']} final_loss={m['final_loss']} sync_bytes={m['sync_bytes']} -> {out / 'report.json'}")
