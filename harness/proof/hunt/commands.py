"""The command-line side of `pschaos hunt`: arguments, progress, the summary and the exit code."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT = {"none": 0, "found": 1, "bad-input": 2, "unknown": 3}


def add_parser(sub) -> None:
    h = sub.add_parser("hunt", help="random fault schedules against a scenario's cluster until one fails; shrink "
                                    "it and write a scenario that replays the failure")
    h.add_argument("scenario", help="scenario file or library name: its cluster and safety checks are used")
    h.add_argument("--budget", type=int, default=20, help="schedules to try (default 20)")
    h.add_argument("--seed", type=int, default=1, help="seeds every schedule and run of the hunt (default 1)")
    h.add_argument("--backend", default="sim", choices=["sim", "process", "docker"],
                   help="where schedules run (default sim: seconds a run, byte-identical replays)")
    h.add_argument("--out", help="folder for trials, hunt.json and the scenario file (default out/hunt-NAME)")
    h.add_argument("--kinds", help="comma-separated fault kinds to draw (default kill,pause,stop,partition,"
                                   "link-down,loss,latency)")
    h.add_argument("--max-faults", type=int, default=3, help="faults per schedule, at most (default 3)")
    h.add_argument("--duration", type=float, default=12.0, help="seconds of training per run (default 12)")
    h.add_argument("--shrink-budget", type=int, default=40, help="runs the shrinker may spend (default 40)")
    h.add_argument("--confirm", dest="confirm", action="store_true", default=None,
                   help="run the shrunk scenario on the real (process) backend too (default: yes when hunting on sim)")
    h.add_argument("--no-confirm", dest="confirm", action="store_false")
    h.add_argument("--json", action="store_true", help="print hunt.json instead of the summary")
    h.add_argument("--on", metavar="ray[=ADDRESS]",
                   help="run the search's schedules as Ray tasks, as many at a time as the cluster has CPUs: on the "
                        "cluster at ADDRESS, or on a new local one bound to 127.0.0.1 with -j CPUs (the same "
                        "schedule is found; the shrink runs here)")
    h.add_argument("-j", "--jobs", type=int, default=2, help="--on ray without an address: the local cluster's CPUs")
    h.add_argument("--mutant", help="hunt on a temporary copy of the code with this bug zoo mutant applied "
                                    "(`pschaos selftest --list` names them): how fast the hunt finds and "
                                    "shrinks a known bug")
    h.set_defaults(fn=hunt_main)


def hunt_mutant(args: argparse.Namespace) -> int:
    """Run this same hunt in a subprocess whose code is a mutant's copy (PYTHONPATH and working
    folder there, as selftest's runs; the confirming process cluster imports it too). The copy
    is removed at the end; the output folder stays where it was asked for."""
    import os
    import subprocess
    import tempfile

    from pschaos.harness.proof.selftest.mutation import load_zoo, mutant_copy
    from pschaos.harness.proof.soak.soak import resolve_scenario

    if getattr(args, "backend", None) == "docker":     # a container runs the image's code, which a copy cannot change
        print("pschaos hunt: --mutant needs --backend process or sim: a container runs the image's code, which a "
              "mutant's copy cannot change", file=sys.stderr)
        return EXIT["bad-input"]
    zoo = {m.name: m for m in load_zoo()}
    if args.mutant not in zoo:
        print(f"pschaos hunt: --mutant {args.mutant!r} is not in the bug zoo; known: {', '.join(zoo)}",
              file=sys.stderr)
        return EXIT["bad-input"]
    scenario = Path(resolve_scenario(args.scenario)).resolve()
    out = Path(args.out or Path("out") / f"hunt-{scenario.stem}-{args.mutant}").resolve()
    argv = [str(scenario), "--budget", str(args.budget), "--seed", str(args.seed), "--backend", args.backend,
            "--out", str(out), "--max-faults", str(args.max_faults), "--duration", str(args.duration),
            "--shrink-budget", str(args.shrink_budget)]
    argv += ["--kinds", args.kinds] if args.kinds else []
    argv += [] if args.confirm is None else ["--confirm" if args.confirm else "--no-confirm"]
    argv += ["--json"] if args.json else []
    argv += ["--on", args.on, "-j", str(args.jobs)] if getattr(args, "on", None) else []
    with tempfile.TemporaryDirectory(prefix=f"pschaos-hunt-{args.mutant}-") as tmp:
        root = mutant_copy(Path(tmp) / "code", zoo[args.mutant].patch)
        print(f"[hunt] mutant {args.mutant}: code copied to {root} with its patch applied", file=sys.stderr,
              flush=True)
        return subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "hunt", *argv], cwd=root,
                              env=dict(os.environ, PYTHONPATH=str(root))).returncode


def hunt_main(args: argparse.Namespace) -> int:
    if getattr(args, "mutant", None):
        return hunt_mutant(args)
    from pschaos.harness.run.scenario import load_scenario
    from pschaos.harness.proof.soak.soak import resolve_scenario
    from pschaos.harness.proof.hunt.hunt import hunt, run_in_process
    from pschaos.harness.faults.moments import MOMENTS
    from pschaos.harness.proof.hunt.space import DEFAULT_KINDS, FaultSpace

    def bad(msg: str) -> int:
        print(f"pschaos hunt: {msg}", file=sys.stderr)
        return EXIT["bad-input"]
    for flag, v in (("--budget", args.budget), ("--max-faults", args.max_faults), ("--shrink-budget", args.shrink_budget)):
        if v < 1:
            return bad(f"{flag} {v}: must be at least 1")
    if args.duration < 8:
        return bad(f"--duration {args.duration}: give at least 8 s (faults start after 2 s and end 4 s before the end)")
    base = load_scenario(resolve_scenario(args.scenario))
    kinds = tuple(k.strip() for k in args.kinds.split(",")) if args.kinds else DEFAULT_KINDS
    try:
        c = base.cluster
        # a kill timed to a checkpoint waits at most 10 s for one: only where the cluster writes them often
        moments = tuple(m for m in MOMENTS if m != "checkpoint" or c.checkpoint_interval_s <= 5.0)
        space = FaultSpace(c.shards, c.copies, c.workers, kinds=kinds, start_s=2.0, stop_s=args.duration - 4.0,
                           moments=moments,
                           max_faults=args.max_faults,
                           # a nemesis's one set of params per kind (its lists of alternatives are its own draw)
                           params={k: v for k, v in (base.nemesis.params.items() if base.nemesis else ())
                                   if isinstance(v, dict)})
    except ValueError as e:
        return bad(f"--kinds: {e}")
    out = Path(args.out) if args.out else Path("out") / f"hunt-{base.name}"
    confirm = args.confirm if args.confirm is not None else args.backend == "sim"

    def say(m: str) -> None:
        print(f"[hunt] {m}", file=sys.stderr, flush=True)
    say(f"{base.name}: up to {args.budget} schedule(s) of 1-{args.max_faults} fault(s) from {', '.join(kinds)} "
        f"on --backend {args.backend}, seed {args.seed} -> {out}")
    hunting = (base, space, args.budget, args.seed, out, run_in_process(args.backend), args.shrink_budget,
               args.duration, args.backend, run_in_process("process") if confirm else None, "process", say)
    if getattr(args, "on", None):
        from pschaos.harness.errors import HarnessError
        from pschaos.harness.fanout.ray_runs import RayPool
        from pschaos.harness.proof.hunt.on_ray import ray_batch
        from pschaos.harness.fanout.ray_runs import parse_on

        on = parse_on(args.on)
        if isinstance(on, str):
            return bad(on)
        if args.backend == "docker":
            return bad("--on ray runs the sim and process backends: a docker run needs the engine and the image on "
                       "every node; run it here without --on")
        try:
            with RayPool(on[1], max(1, args.jobs), args.backend, say) as pool:
                res = hunt(*hunting, batch=ray_batch(pool), width=pool.width)
        except HarnessError as e:
            return bad(str(e))
    else:
        res = hunt(*hunting)
    doc = res.to_json()
    if args.json:
        print(json.dumps(doc, indent=2))
    elif res.found is None:
        print(f"pschaos hunt {base.name}: no failure in {len(res.trials)} schedule(s) ({doc['verdicts']}) "
              f"in {res.wall_s:.0f}s -> {out / 'hunt.json'}")
    else:
        s = res.shrunk
        print(f"pschaos hunt {base.name}: schedule {res.found.index + 1} (seed {res.found.seed}) failed "
              f"{', '.join(res.found.failed)} after {res.find_s:.0f}s; shrunk from {len(res.found.faults)} to "
              f"{len(s.faults)} fault(s) in {s.runs} run(s), {res.shrink_s:.0f}s:")
        for f in s.faults:
            print(f"  {f.kind} {f.target} at {f.at.time}s" + (f" for {f.duration_s}s" if f.duration_s else ""))
        print(f"  scenario: {res.scenario_file}\n  replay:   {res.replay}")
        if res.replayed:
            print(f"  replayed: {str(res.replayed['verdict']).upper()} {res.replayed['failed']}")
        if res.confirmed:
            print(f"  on {res.confirmed['backend']}: {str(res.confirmed['verdict']).upper()} {res.confirmed['failed']}")
    if res.found is not None:
        return EXIT["found"]
    return EXIT["unknown"] if any(t.verdict == "unknown" for t in res.trials) else EXIT["none"]


__all__ = ["add_parser", "hunt_main"]
