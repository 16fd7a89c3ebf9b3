"""`pschaos sim scale` and `pschaos sim sweep`: the scale level from the command line."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pschaos.harness.backends.sim.scale.build import build


def add_parsers(smsub) -> None:
    sc = smsub.add_parser("scale", help="one cluster far beyond the per-RPC twin (thousands of workers), "
                                        "failures from a published preset; prints figures, --out writes a report")
    sc.add_argument("--workers", type=int, default=64)
    sc.add_argument("--shards", type=int, default=16)
    sc.add_argument("--copies", type=int, default=3)
    sc.add_argument("--hours", type=float, default=1.0, help="simulated hours (default 1)")
    sc.add_argument("--seed", type=int, default=1)
    sc.add_argument("--model", default="mlp", help="mlp | widedeep: the calibrated step (default mlp)")
    sc.add_argument("--replication", default="sync", choices=["sync", "async"])
    sc.add_argument("--training", default="async", choices=["async", "bsp"])
    sc.add_argument("--param-mb", type=float, help="model size in MB (default: the calibrated model's own)")
    sc.add_argument("--shards-per-step", type=int,
                    help="shards one step pulls from and pushes to (default: all, a dense model)")
    sc.add_argument("--failures", default="llama3", help="preset: llama3 | osdi14 | none (docs/internals/scale.md)")
    for k, unit in (("worker-mtbf", "hours"), ("worker-repair", "seconds"), ("server-mtbf", "hours"),
                    ("server-repair", "seconds"), ("etcd-mtbf", "hours"), ("etcd-repair", "seconds")):
        sc.add_argument(f"--{k}", help=f"override the preset: exp:MEAN | fixed:V | lognormal:MEDIAN:SIGMA ({unit})")
    sc.add_argument("--heartbeat-s", type=float)
    sc.add_argument("--suspect-s", type=float)
    sc.add_argument("--detector", choices=["phi", "fixed"], help="psnodes' failure detector (default: phi)")
    sc.add_argument("--heartbeat-loss", type=float, help="chance a heartbeat packet is lost (spurious failovers)")
    sc.add_argument("--checkpoint-interval-s", type=float)
    sc.add_argument("--candidate-window-s", type=float)
    sc.add_argument("--lease-ttl-s", type=float)
    sc.add_argument("--max-lag", type=int, help="async: entries a replica may trail (lost at a failover at most)")
    sc.add_argument("--min-isr", type=int, help="sync acks need this many in-sync copies (default: psnodes' rule)")
    sc.add_argument("--server-request-s", type=float,
                    help="a primary's CPU per request (default: the calibration's, measured on a real primary)")
    sc.add_argument("--target-steps", type=int, help="global steps to the target loss: reports time_to_target_s")
    sc.add_argument("--calibration", help="calibration file (default: the committed one)")
    sc.add_argument("--json", action="store_true", help="the result as one JSON object")
    sc.add_argument("--out", help="a folder for scale.json and report.html")
    sw = smsub.add_parser("sweep", help="a grid of scale runs from a YAML spec, in parallel, with an aggregate "
                                        "report (examples: scenarios/sweeps/)")
    sw.add_argument("spec", help="sweep spec YAML")
    sw.add_argument("--out", required=True, help="folder for runs/, sweep.json and report.html")
    sw.add_argument("-j", "--jobs", type=int, default=0, help="parallel runs (default: one per core)")
    sw.add_argument("--calibration", help="calibration file (default: the committed one)")
    sw.add_argument("--on", metavar="ray[=ADDRESS]",
                    help="run each grid point's seeds as Ray tasks: on the cluster at ADDRESS, or on a new local one "
                         "bound to 127.0.0.1 with -j CPUs (pip install 'pschaos[ray]')")


def _calibration(path: str | None):
    from pschaos.harness.backends.sim.calibration import DEFAULT_PATH, Calibration
    return Calibration.load(path or DEFAULT_PATH), str(path or DEFAULT_PATH)


def scale_main(args: argparse.Namespace) -> int:
    from pschaos.harness.backends.sim.scale.engine import ScaleRun

    keys = ("workers", "shards", "copies", "hours", "seed", "model", "replication", "training", "param_mb",
            "shards_per_step",
            "failures", "worker_mtbf", "worker_repair", "server_mtbf", "server_repair", "etcd_mtbf", "etcd_repair",
            "heartbeat_s",
            "suspect_s", "detector", "heartbeat_loss", "checkpoint_interval_s", "target_steps", "candidate_window_s",
            "lease_ttl_s", "max_lag", "min_isr", "server_request_s")
    spec = build({k: getattr(args, k) for k in keys}, "pschaos sim scale")
    cal, cal_path = _calibration(args.calibration)
    say = (lambda m: print(m, file=sys.stderr, flush=True))
    res = ScaleRun(spec, cal, progress=say, cal_path=cal_path).run()
    if args.out:
        from pschaos.reports.scale import summary_md, write_run
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "scale.json").write_text(json.dumps(res, indent=2) + "\n")
        write_run(res, out / "report.html")
        (out / "summary.md").write_text(summary_md(res))
        say(f"scale: wrote {out / 'scale.json'}, {out / 'report.html'} and {out / 'summary.md'}")
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k not in ("series", "incidents", "failover_quantiles_ms")},
                         indent=2))
    else:
        fo = res["failover_ms"]
        print(f"scale: {spec.workers} workers x {spec.shards} shards x {spec.copies} copies, {spec.hours:g} h "
              f"({res['spec']['failures']['preset']}): {res['worker_steps']:,} worker steps in {res['wall_s']} s "
              f"wall ({res['worker_steps_per_wall_s']:,}/s), {res['events']} events, {res['failovers']} failovers "
              f"(p50 {fo['p50']} ms, p99 {fo['p99']} ms), {res['lost_acked_updates']} lost acked updates, "
              f"availability {res['availability']['cluster']}")
    return 0


def sweep_main(args: argparse.Namespace) -> int:
    from pschaos.harness.backends.sim.scale.sweep import run_sweep

    from pschaos.harness.fanout.ray_runs import parse_on

    on = parse_on(getattr(args, "on", None))
    if isinstance(on, str):
        print(f"pschaos sim sweep: {on}", file=sys.stderr)
        return 2
    if on[0] and args.jobs <= 0:
        args.jobs = 2            # a local cluster's CPUs
    return run_sweep(Path(args.spec), Path(args.out), args.jobs, args.calibration, on)
