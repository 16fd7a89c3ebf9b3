"""`pschaos`: run scenarios, bring a local cluster up or down, check the real parts, clean up.

Exit codes: 0 pass, 1 a check failed, 2 bad input or a missing dependency (the message says how
to fix it), 3 unknown (the run could not decide: a fault did not fire or heal, evidence was
missing, a checker crashed; the report says why).
"""
from __future__ import annotations

import signal
import sys

# Until main() installs Python's own handler, a Ctrl-C exits 130 at once, quietly: the imports
# below and in build_parser take long enough on a loaded machine for one to land there, and
# Python's default raised KeyboardInterrupt inside an import, a traceback instead of our line.
# Nothing has started yet, so there is nothing to stop. Only in the main thread (tests import us).
if __name__ == "__main__" or sys.argv[0].rsplit("/", 1)[-1] == "pschaos":
    signal.signal(signal.SIGINT, lambda signum, frame: sys.exit(130))

import argparse  # noqa: E402 - after the handler above
import json  # noqa: E402
import math  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

from pschaos.psnodes.errors import PSError  # noqa: E402

from pschaos.harness.errors import HarnessError  # noqa: E402


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
    scenarios = [load_scenario(p) for p in args.scenario]   # validate all before running any
    for sc in scenarios:
        out = Path(args.out) if args.out and len(scenarios) == 1 else (
            Path(args.out) / sc.name if args.out else default_out(sc, args.seed))
        rep = Runner(sc, args.seed, out, args.backend, quiet=args.quiet, keep_data=args.keep_data,
                     make_backend=make).run()
        print(summary_line(rep, out))
        print_not_passed(rep["checks"])
        if rep["verdict"] != "pass":
            print(f"  rerun: {rep['rerun']}")
        codes.append(EXIT_CODES[rep["verdict"]])
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


def cmd_report(args: argparse.Namespace) -> int:
    from pschaos.reports.aggregate import aggregate, write
    from pschaos.reports.gate import find_reports

    reports = [(p, r) for p, r in find_reports(args.dirs) if Path(args.out).resolve() not in p.resolve().parents]
    if not reports:
        print(f"pschaos report: no report.json under {', '.join(args.dirs)}", file=sys.stderr)
        return 2
    agg = aggregate(reports)
    write(agg, Path(args.out))
    print(f"pschaos report: {agg['passed']}/{agg['runs']} runs passed across {len(agg['scenarios'])} scenario(s); "
          f"flaky: {', '.join(agg['flaky']) or 'none'} -> {Path(args.out) / 'report.html'}")
    return 0


def cmd_gate(args: argparse.Namespace) -> int:
    from pschaos.reports.gate import GateFileError, evaluate, find_reports, load_gate

    try:
        gate = load_gate(args.gate)
    except GateFileError as e:
        print(f"pschaos gate: {e}", file=sys.stderr)
        return 2
    reports = find_reports(args.dirs)
    if not reports:
        print(f"pschaos gate: no report.json under {', '.join(args.dirs)}", file=sys.stderr)
        return 2
    violations = evaluate(gate, reports)
    for v in violations:
        print(f"GATE FAIL {v}")
    scenarios = len({r.get("scenario") for _, r in reports})
    print(f"pschaos gate: {len(reports)} run(s) of {scenarios} scenario(s); "
          f"{'all bounds hold' if not violations else f'{len(violations)} violation(s)'}")
    return 1 if violations else 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from pschaos.harness.commands.doctor import doctor

    return doctor(as_json=args.json)


def cmd_clean(args: argparse.Namespace) -> int:
    from pschaos.harness.commands.clean import clean

    return clean(all_runs=args.all)


def cmd_cluster(args: argparse.Namespace) -> int:
    from pschaos.harness.commands import cluster as local_cluster

    if args.action == "up":
        return local_cluster.up(args)
    if args.action == "down":
        return local_cluster.down(args)
    if args.action == "scale":
        from pschaos.harness.commands.cluster_scale import scale

        return scale(args)
    return local_cluster.status(args)


def cmd_bench(args: argparse.Namespace) -> int:
    if args.what == "sim":
        from pschaos.harness.proof.bench.sim import bench_sim

        return bench_sim(args)
    if args.what == "scale":
        from pschaos.harness.proof.bench.scale import bench_scale

        return bench_scale(args)
    from pschaos.harness.proof.bench.ps import bench_ps

    return bench_ps(args)


def cmd_soak(args: argparse.Namespace) -> int:
    from pschaos.harness.proof.soak.soak import soak

    return soak(args)


def cmd_demo(args: argparse.Namespace) -> int:
    from pschaos.harness.commands.demo import demo

    return demo(args)


def cmd_fuzz(args: argparse.Namespace) -> int:
    from pschaos.harness.proof.fuzz.session import fuzz_main

    return fuzz_main(args)


def cmd_sim(args: argparse.Namespace) -> int:
    from pschaos.harness.proof.twin.commands import sim_main

    return sim_main(args)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="pschaos", description="Chaos harness for parameter-server training clusters")
    sub = ap.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="run scenario files and judge them")
    r.add_argument("scenario", nargs="+", help="scenario YAML file(s)")
    r.add_argument("--backend", default="process", choices=["process", "docker", "sim"])
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--out", help="output folder (default out/<scenario>-<seed>)")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
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

    rp = sub.add_parser("report", help="aggregate many runs into one report (HTML, JSON, Markdown)")
    rp.add_argument("dirs", nargs="+", help="run folders (searched for report.json)")
    rp.add_argument("--out", default="out/aggregate", help="where to write (default out/aggregate)")
    rp.set_defaults(fn=cmd_report)

    g = sub.add_parser("gate", help="check runs against a gate file (exit 0 holds, 1 violated, 2 malformed)")
    g.add_argument("dirs", nargs="+", help="run folders (searched for report.json)")
    g.add_argument("--gate", required=True, help="gate file (YAML)")
    g.set_defaults(fn=cmd_gate)

    d = sub.add_parser("doctor", help="list the real parts and their versions, or how to install them")
    d.add_argument("--json", action="store_true")
    d.set_defaults(fn=cmd_doctor)

    c = sub.add_parser("clean", help="reap processes left by killed runs")
    c.add_argument("--all", action="store_true", help="also runs whose owner is still alive (e.g. cluster up)")
    c.set_defaults(fn=cmd_clean)

    cl = sub.add_parser("cluster", help="a local cluster of processes")
    cl.add_argument("action", choices=["up", "down", "status", "scale"])
    cl.add_argument("--shards", type=int, default=None,
                    help="up: shards at start (default 2); scale: the shard count to move to (required)")
    cl.add_argument("--max-shards", type=int, default=0,
                    help="up: shard groups to give addresses for, so `cluster scale` can add shards (default --shards)")
    cl.add_argument("--abort-migration", action="store_true",
                    help="scale: abort a migration the routing record still holds (its coordinator was stopped) "
                         "before moving to --shards")
    cl.add_argument("--fenced-hold-s", type=float, default=0.0,
                    help="scale: hold the fenced hand-off this long (0-10 s; the moving keys are unwritable "
                         "meanwhile), as a large delta would: to rehearse a coordinator stopped mid-migration")
    cl.add_argument("--replicas", type=int, default=2, help="replicas per shard besides the primary")
    cl.add_argument("--workers", type=int, default=2)
    cl.add_argument("--mode", default="sync", choices=["sync", "async"])
    cl.add_argument("--model", default="mlp", choices=["mlp", "widedeep"])
    cl.add_argument("--steps", type=int, default=1000)
    cl.add_argument("--seed", type=int, default=1)
    cl.add_argument("--dir", default=".pschaos/cluster", help="where the cluster keeps its state")
    cl.add_argument("--backend", default="process", choices=["process", "docker"],
                    help="local processes, or containers on the host network (up only)")
    cl.set_defaults(fn=cmd_cluster)

    b = sub.add_parser("bench", help="benchmarks, measured as ratios in one run")
    b.add_argument("what", choices=["ps", "sim", "scale"],
                   help="ps: throughput and failover against baselines; sim: the simulator's wall time against "
                        "real processes; scale: the scale level's speed and memory against the per-RPC twin")
    b.add_argument("--json", action="store_true")
    b.add_argument("--kills", type=int, default=20)
    b.add_argument("--mb", type=float, default=4.0)
    b.add_argument("--seconds", type=float, default=2.0, help="measuring time per throughput figure and round")
    b.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians are reported")
    b.add_argument("--scenarios", help="sim: comma-separated library scenarios (default: six of the core)")
    b.add_argument("--seed", type=int, default=1, help="sim: the seed of every run (default 1)")
    b.add_argument("--soak-seeds", type=int, default=3, help="sim: nemesis-soak seeds timed on sim (default 3; 0 skips)")
    b.set_defaults(fn=cmd_bench)

    sk = sub.add_parser("soak", help="one scenario over many seeds: pass rate, lost acks, failover, flaky seeds "
                                     "(exit 0 all pass, 1 any fail, 3 any unknown, 2 bad input)")
    sk.add_argument("scenario", help="scenario YAML file, or a library name (nemesis-soak)")
    sk.add_argument("--seeds", type=int, required=True, help="how many seeds")
    sk.add_argument("--first-seed", type=int, default=1)
    sk.add_argument("-n", dest="par", type=int, default=1, help="runs at a time (default 1)")
    sk.add_argument("--repeat", type=int, default=1, help="runs per seed (flaky: a seed that passes and fails)")
    sk.add_argument("--backend", default="process", choices=["process", "docker", "sim"])
    sk.add_argument("--out", help="output folder (default out/soak-<scenario>)")
    sk.add_argument("--timeout", type=float, default=900.0, help="seconds per run before it is interrupted "
                                                                 "and counted unknown (default 900)")
    sk.set_defaults(fn=cmd_soak)

    dm = sub.add_parser("demo", help="local cluster, training, a primary killed mid-training, the outcome")
    dm.add_argument("--seed", type=int, default=1)
    dm.add_argument("--out", default="out/demo")
    dm.set_defaults(fn=cmd_demo)

    fz = sub.add_parser("fuzz", help="hostile gRPC client against its own 1x3 cluster: refused requests must change "
                                     "nothing (exit 0 none found, 1 violations, 3 no evidence)")
    fz.add_argument("--requests", type=int, default=10000, help="cases to send (default 10000)")
    fz.add_argument("--seed", type=int, default=1, help="the one seed of every generated case (default 1)")
    fz.add_argument("--json", action="store_true", help="the summary as one JSON object")
    fz.add_argument("--out", help="summary.json, cases.jsonl and the clusters' files (default out/fuzz-<seed>)")
    fz.add_argument("--max-restarts", type=int, default=3,
                    help="fresh clusters after a case left the shard broken, before the run stops (default 3)")
    fz.set_defaults(fn=cmd_fuzz)

    from pschaos.harness.proof.hunt.commands import add_parser as add_hunt
    add_hunt(sub)
    sm = sub.add_parser("sim", help="the SimPy twin: calibrate it on real clusters, validate it against them, "
                                     "simulate clusters at scale")
    smsub = sm.add_subparsers(dest="sim_cmd", required=True)
    sc = smsub.add_parser("calibrate", help="measure the twin's timings on real processes, write a calibration file")
    sc.add_argument("--out", help="calibration file to write (default: the committed harness/backends/sim/calibration.json)")
    sv = smsub.add_parser("validate", help="real scenarios and their sim twins at several seeds: measured vs "
                                           "predicted, relative errors (exit 0 within targets, 1 outside)")
    sv.add_argument("--seeds", type=int, default=5, help="seeds per scenario (default 5)")
    sv.add_argument("--scenario", action="append", metavar="NAME",
                    help="only this scenario of the set (repeatable; default all): kill-primary, "
                         "replica-restart-catchup, async-kill-primary, ssp-kill-primary, scale-out-shards, "
                         "scale-in-shards")
    sv.add_argument("--json", action="store_true", help="the comparison as one JSON object")
    sv.add_argument("--out", default="out/sim-validate", help="run folders and validate.json (default out/sim-validate)")
    sv.add_argument("--calibration", help="calibration file (default: the committed one)")
    sv.add_argument("--calibrate", action="store_true",
                    help="measure a fresh calibration on this machine first (OUT/calibration.json, about 5 minutes) and "
                         "predict with it: real timings here move with the machine's load")
    sv.add_argument("--background", default="auto", metavar="auto|JOBS",
                    help="other tenants' load the twin's cores carry (harness/backends/sim/cpu.py): auto (default) gives "
                         "each sim run the background_cores its real run measured (report.json host_load), a "
                         "number that many jobs on every sim run, 0 an idle host")
    sv.add_argument("--host-slowdown", default="auto", metavar="auto|FACTOR",
                    help="how much slower the twin's cores run than at calibration (harness/machinery/hostspeed.py): auto "
                         "(default) gives each sim run its real run's speed probe over the calibration's "
                         "(host_probe_ms), a number that factor on every sim run, 1 the calibration's speed")
    from pschaos.harness.backends.sim.scale.commands import add_parsers as add_scale     # the scale level (issue 11)
    add_scale(smsub)
    sm.set_defaults(fn=cmd_sim)

    from pschaos.harness.proof.selftest.selftest import add_parser as add_selftest     # the bug zoo's mutation score (issue 10)
    add_selftest(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C must stop a run and tear it down even when a shell started us with SIGINT ignored
    # (a background job in a script, nohup): Python keeps an inherited SIG_IGN.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # inside the handler: building the parser imports every subcommand's modules, long
        # enough on a loaded machine for a Ctrl-C to land there
        args = build_parser().parse_args(argv)
        return args.fn(args)
    except (HarnessError, PSError) as e:
        print(f"pschaos: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pschaos: interrupted; everything started was stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
