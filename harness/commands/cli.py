"""`pschaos`: run scenarios, bring a local cluster up or down, check the real parts, clean up.

Exit codes: 0 pass, 1 a check failed, 2 bad input or a missing dependency (the message says how
to fix it), 3 unknown (the run could not decide: a fault did not fire or heal, evidence was
missing, a checker crashed; the report says why).
"""
from __future__ import annotations

import sys

import _signal

# Until main() installs Python's own handler, a Ctrl-C exits 130 at once, quietly: the imports
# below and in build_parser take long enough on a loaded machine for one to land there, and
# Python's default raised KeyboardInterrupt inside an import, a traceback instead of our line.
# Nothing has started yet, so there is nothing to stop. Only in the main thread (tests import us).
# The handler goes in through `_signal`, the built-in C module: importing `signal` first runs its
# enum set-up in Python, and a SIGINT 0.1 s after start landed there (CI, fresh clone, stop 42).
if __name__ == "__main__" or sys.argv[0].rsplit("/", 1)[-1] in ("pschaos", "__main__.py"):
    _signal.signal(_signal.SIGINT, lambda signum, frame: sys.exit(130))

import argparse  # noqa: E402 - after the handler above
import signal  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402

import pschaos  # noqa: E402
from pschaos.psnodes.errors import PSError  # noqa: E402

from pschaos.harness.commands import init, refdocs, reports, run, scenarios  # noqa: E402
from pschaos.harness.errors import HarnessError  # noqa: E402


def cmd_doctor(args: argparse.Namespace) -> int:
    from pschaos.harness.commands.doctor import doctor

    if args.on is not None:
        from pschaos.harness.commands.doctor import doctor_on_ray
        from pschaos.harness.fanout.ray_runs import parse_on

        on = parse_on(args.on)
        if isinstance(on, str):
            print(f"pschaos doctor: {on}")
            return 2
        return doctor_on_ray(on[1], as_json=args.json)
    return doctor(as_json=args.json)


def cmd_clean(args: argparse.Namespace) -> int:
    from pschaos.harness.commands.clean import clean

    return clean(all_runs=args.all)


def cmd_cluster(args: argparse.Namespace) -> int:
    from pschaos.harness.commands import cluster as local_cluster

    if args.replicas is not None:           # the old flag: replicas besides the primary
        if args.copies is not None:
            print("pschaos cluster: give --copies (copies per shard, the primary included), not --replicas too",
                  file=sys.stderr)
            return 2
        print(f"pschaos cluster: --replicas {args.replicas} is --copies {args.replicas + 1} now (copies per shard, "
              "the primary included, as scenarios say it)", file=sys.stderr)
        args.copies = args.replicas + 1
    args.copies = 3 if args.copies is None else args.copies
    args.replication = args.replication or args.mode or "sync"
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
    ap.add_argument("--version", action="version", version=f"pschaos {pschaos.__version__}")
    ap.set_defaults(parser=ap)           # `pschaos docs` documents this very parser
    sub = ap.add_subparsers(dest="cmd", required=True)
    run.add_parsers(sub)
    reports.add_parsers(sub)
    init.add_parsers(sub)
    scenarios.add_parsers(sub)
    refdocs.add_parsers(sub)
    d = sub.add_parser("doctor", help="list the real parts and their versions, or how to install them")
    d.add_argument("--json", action="store_true")
    d.add_argument("--on", metavar="ray[=ADDRESS]",
                   help="ask every node of a Ray cluster (ADDRESS, or a new local one on 127.0.0.1) what it has, "
                        "and what it lacks for sim and process runs (exit 1 when a node lacks something: no such "
                        "run is placed there)")
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
    cl.add_argument("--copies", type=int, default=None, help="copies per shard, the primary included, as "
                                                                "scenarios say it (default 3)")
    cl.add_argument("--replicas", type=int, default=None, help=argparse.SUPPRESS)   # before --copies: copies - 1
    cl.add_argument("--workers", type=int, default=2)
    cl.add_argument("--replication", default=None, choices=["sync", "async"],
                    help="replication mode, as scenarios say it (default sync)")
    cl.add_argument("--mode", default=None, choices=["sync", "async"], help=argparse.SUPPRESS)   # before --replication
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
    b.add_argument("--ray-seeds", type=int, default=0,
                   help="sim: nemesis-soak seeds run through Ray on a local cluster with 1, then 2 workers: seeds/hour, "
                        "scaling efficiency, the 1,000-seed projection (default 0: skipped; needs pschaos[ray])")
    b.set_defaults(fn=cmd_bench)

    sk = sub.add_parser("soak", help="one scenario over many seeds: pass rate, lost acks, failover, flaky seeds "
                                     "(exit 0 all pass, 1 any fail, 3 any unknown, 2 bad input)")
    sk.add_argument("scenario", help="scenario YAML file, or a library name (nemesis-soak)")
    sk.add_argument("--seeds", type=int, required=True, help="how many seeds")
    sk.add_argument("--first-seed", type=int, default=1)
    sk.add_argument("-j", "--jobs", dest="par", type=int, default=1, help="runs at a time (default 1)")
    sk.add_argument("-n", dest="par", type=int, help=argparse.SUPPRESS)      # before -j: the same
    sk.add_argument("--repeat", type=int, default=1, help="runs per seed (flaky: a seed that passes and fails)")
    sk.add_argument("--json", action="store_true", help="print the aggregate (soak.json) and its exit code as JSON")
    sk.add_argument("--backend", default="process", choices=["process", "docker", "sim"])
    sk.add_argument("--out", help="output folder (default out/soak-<scenario>)")
    sk.add_argument("--timeout", type=float, default=900.0, help="seconds per run before it is interrupted "
                                                                 "and counted unknown (default 900)")
    sk.add_argument("--on", metavar="ray[=ADDRESS]",
                    help="run each seed as a Ray task: on the cluster at ADDRESS (ray.init's: auto on a node of "
                         "it, or ray://HEAD:10001), or on a new local cluster bound to 127.0.0.1 with -j CPUs "
                         "(pip install 'pschaos[ray]'); sim and process backends")
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
    from pschaos.harness.commands.image import add_parser as add_image
    add_image(sub)
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
    sv.add_argument("--on", metavar="ray[=ADDRESS]",
                    help="run the twin runs as Ray tasks (the real runs stay here: each twin needs its real run's "
                         "load and host speed): on the cluster at ADDRESS, or on a local one on 127.0.0.1")
    from pschaos.harness.backends.sim.scale.commands import add_parsers as add_scale     # the scale level (issue 11)
    add_scale(smsub)
    sm.set_defaults(fn=cmd_sim)

    from pschaos.harness.proof.selftest.selftest import add_parser as add_selftest     # the bug zoo's mutation score (issue 10)
    add_selftest(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C must stop a run and tear it down even when a shell started us with SIGINT ignored
    # (a background job in a script, nohup): Python keeps an inherited SIG_IGN.
    try:
        # inside the try: Python's own handler is in force from start-up, so a Ctrl-C can land on
        # this very line (make test, 2026-12-07: a traceback from signal.signal, 0.1 s after start)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
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
    except BrokenPipeError:             # `pschaos list | head`: the reader left; nothing is wrong
        sys.stdout = open(os.devnull, "w")
        return 0


if __name__ == "__main__":
    sys.exit(main())
