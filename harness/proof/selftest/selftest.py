"""`pschaos selftest`: prove the checkers by the bugs they catch, with a mutation score.

First the default suite runs on the unmodified code: it must pass, or the score would measure
a broken suite (selftest then stops with that verdict). Then, for every mutant of the bug zoo
(tests/zoo/registry.py), the suite runs against a temporary copy of the code with the mutant's
patch applied, the mutant's likely scenarios first, and stops at the first run that fails: the
mutant is killed. Runs are `pschaos run` subprocesses with PYTHONPATH at the copy, -j at a
time (harness/proof/selftest/exec.py); verdicts, score and report are harness/proof/selftest/score.py.
The copies live in one temporary folder, removed at the end, after a failure, Ctrl-C or SIGTERM.

The default suite (`DEFAULT_SUITE`) is the part of the scenario library that covers every
checker and every mechanism the zoo's bugs live in, at the lowest cost: failover in sync and
async mode, an isolated primary that must stop acking, a paused primary that must be fenced, a
replica that restarts and catches up, a kill during a checkpoint, the loss of every copy
(restore), a split brain through a restore, a stale checkpoint writer, SSP across a failover
and SSP with a straggler (ssp-straggler, written for the zoo: without a straggler the bound is
never reached), a restarted worker and lossy worker links (retries), a power cut mid-checkpoint,
a checkpoint rotted at rest and a manifest torn at its sync (the durability bugs no kill shows;
the torn one on processes only). Left out: scenarios that add time but no checker or mechanism
the chosen ones lack (flapping-primary, loss-5, bandwidth, scale-out, nemesis-soak:
25-45 s each in the twin), and the three container-only faults (unknown off --backend docker).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import json
import signal
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Callable, Iterator

from pschaos.harness.proof.selftest.mutation import Mutant, load_zoo, mutant_copy, patch_problems
from pschaos.harness.proof.selftest.score import MutantResult, RunOutcome, baseline_verdict, exit_code, report, text, write
from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.tools import REPO
from pschaos.harness.run import library

DEFAULT_SUITE = (
    "partition-primary-replicas", "kill-primary", "pause-primary", "kill-replica", "replica-restart-catchup",
    "kill-during-checkpoint", "all-copies-lost", "split-brain-restore", "stale-checkpoint-writer",
    "ssp-kill-primary", "ssp-straggler", "async-kill-primary", "async-partition-primary", "kill-restart-worker",
    "loss-20-worker-links", "short-cut-primary", "latency-primary-replica",
    "power-loss-primary-mid-checkpoint", "bit-rot-newest-checkpoint", "torn-manifest",
)
BACKENDS = ("process", "sim")
NEEDS_FUSE = ("power-loss-primary-mid-checkpoint", "torn-manifest")      # the power-loss disk on processes
PROCESS_ONLY = ("torn-manifest",)       # the twin's disk tears no write


def default_suite(backend: str) -> list[str]:
    """DEFAULT_SUITE, less what cannot run here: on processes without FUSE the power-loss scenarios
    (their baselines would be unknown and no mutant would run), said on stderr; in the twin the
    torn write, which its disk does not make."""
    from pschaos.diskfaults.mounts import available

    why = available() if backend == "process" else ""
    if why:
        print(f"[selftest] leaving out {', '.join(NEEDS_FUSE)}: the power-loss disk cannot be mounted here ({why})",
              file=sys.stderr)
    return [s for s in DEFAULT_SUITE if not (why and s in NEEDS_FUSE) and not (backend != "process" and s in PROCESS_ONLY)]


class BadInput(ValueError):
    """A flag's value selftest cannot run with (exit 2, the message says what to use)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    st = sub.add_parser("selftest", help="run the default suite against the bug zoo's mutants: killed or survived "
                                         "per mutant, and the mutation score (exit 0 score >= --min-score, "
                                         "1 below or baseline failed, 3 baseline unknown, 2 bad input)")
    st.add_argument("--backend", default="sim", help="process or sim (default sim)")
    st.add_argument("--json", action="store_true", help="print the report as one JSON object")
    st.add_argument("--mutants", help="comma-separated mutant names (default: the whole zoo; --list names them)")
    st.add_argument("--scenarios", help="comma-separated library scenarios instead of the default suite")
    st.add_argument("--seeds", type=int, default=1, help="seeds per scenario, 1..N (default 1)")
    st.add_argument("-j", "--jobs", dest="par", type=int, default=2, help="runs at a time (default 2)")
    st.add_argument("--timeout", type=float, default=600.0, help="seconds per run before it is stopped and "
                                                                 "counted unknown (default 600)")
    st.add_argument("--min-score", type=float, default=0.9, help="the score below which selftest exits 1 "
                                                                 "(default 0.9)")
    st.add_argument("--out", help="run folders and selftest.json (default out/selftest-<backend>)")
    st.add_argument("--list", action="store_true", help="list the zoo's mutants and exit")
    st.add_argument("--on", metavar="ray[=ADDRESS]",
                    help="run every run as a Ray task (each node makes the mutant's copy of its own pschaos): on the "
                         "cluster at ADDRESS, or on a new local one bound to 127.0.0.1 with -j CPUs")
    st.add_argument("--zoo", help="a zoo of your own: a Python file whose MUTANTS lists Mutant objects "
                                  "(default: the built-in zoo, tests/zoo/registry.py of a source checkout)")
    st.set_defaults(fn=selftest)


def _names(raw: str | None, known: list[str], what: str) -> list[str] | None:
    if raw is None:
        return None
    names = [n.strip() for n in raw.split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if not names or bad:
        raise BadInput(f"--{what} {raw!r}: unknown {what[:-1]} {', '.join(bad) or '(empty list)'}; "
                       f"known: {', '.join(known)}")
    return list(dict.fromkeys(names))


def validate(args: argparse.Namespace, zoo: list[Mutant]) -> tuple[list[Mutant], list[str]]:
    """The mutants and the suite to run, or BadInput naming the flag, the value and the fix."""
    if args.backend not in BACKENDS:
        why = (" (each mutant would need an image of its own: minutes of image build per mutant)"
               if args.backend == "docker" else "")
        raise BadInput(f"--backend {args.backend!r}: selftest runs on {' or '.join(BACKENDS)}{why}")
    for flag, val in (("--seeds", args.seeds), ("-j", args.par)):
        if val < 1:
            raise BadInput(f"{flag} {val}: must be at least 1")
    if not args.timeout > 0:
        raise BadInput(f"--timeout {args.timeout}: must be positive (seconds per run)")
    names = library.names()
    suite = _names(args.scenarios, names, "scenarios") or default_suite(args.backend)
    missing = [s for s in suite if s not in names]
    if missing:
        raise BadInput(f"the default suite names scenarios the library lacks: {', '.join(missing)}")
    picked = _names(args.mutants, [m.name for m in zoo], "mutants")
    mutants = [m for m in zoo if picked is None or m.name in picked]
    return mutants, suite


def order(m: Mutant, suite: list[str], seeds: list[int]) -> list[tuple[str, int]]:
    """The mutant's likely scenarios first (those in the suite), then the rest of the suite."""
    first = [s for s in m.scenarios if s in suite]
    return [(s, seed) for s in first + [s for s in suite if s not in first] for seed in seeds]


def _progress(msg: str) -> None:
    print(f"[selftest] {msg}", file=sys.stderr, flush=True)


def run_baseline(suite: list[str], seeds: list[int], backend: str, out: Path, par: int,
                 timeout: float, runner: Callable | None = None) -> tuple[list[RunOutcome], int]:
    """The suite on the unmodified code, stopping at the first run that does not pass."""
    from pschaos.harness.proof.selftest.exec import Task, run_queues

    tasks = deque(Task(None, s, seed, REPO, out / "baseline" / f"{s}-s{seed}") for s in suite for seed in seeds)
    planned = len(tasks)
    done: list[RunOutcome] = []

    def seen(o: RunOutcome) -> str | None:
        done.append(o)
        _progress(f"baseline {len(done)}/{planned} {o.scenario} seed={o.seed} {o.verdict.upper()} ({o.wall_s:.0f} s)"
                  + (f": {o.reason}" if o.verdict != "pass" else ""))
        return None if o.verdict == "pass" else "all"

    (runner or run_queues)({None: tasks}, par, backend, timeout, seen)
    return done, planned


def run_mutants(mutants: list[Mutant], suite: list[str], seeds: list[int], backend: str, out: Path,
                tmp: Path, par: int, timeout: float, runner: Callable | None = None) -> list[MutantResult]:
    """Every mutant's copy and queue; a queue ends at its first failing run. With a `runner` of
    Ray's, each node makes the mutant's copy itself (on_ray.py): none is made here."""
    from pschaos.harness.proof.selftest.exec import Task, run_queues

    results = {m.name: MutantResult(m.name, m.description, m.models, m.checker, m.sim) for m in mutants}
    queues: dict[str | None, deque[Task]] = {}
    for m in mutants:
        root = REPO if runner is not None else mutant_copy(tmp / m.name, m.patch)
        queues[m.name] = deque(Task(m.name, s, seed, root, out / m.name / f"{s}-s{seed}")
                               for s, seed in order(m, suite, seeds))
    t0 = time.monotonic()

    def seen(o: RunOutcome) -> str | None:
        r = results[o.mutant]
        r.runs.append(o)
        r.wall_s = sum(x.wall_s for x in r.runs)
        _progress(f"{o.mutant}: {o.scenario} seed={o.seed} {o.verdict.upper()} ({o.wall_s:.0f} s)"
                  + (f" -> KILLED ({', '.join(o.failed_checks)})" if o.verdict == "fail" else
                     f": {o.reason}" if o.verdict == "unknown" else "")
                  + f"  [{time.monotonic() - t0:.0f} s]")
        return "queue" if o.verdict == "fail" else None

    (runner or run_queues)(queues, par, backend, timeout, seen)
    return [results[m.name] for m in mutants]


def selftest(args: argparse.Namespace) -> int:
    try:
        zoo = load_zoo(Path(args.zoo)) if args.zoo else load_zoo()
        if args.list:
            for m in zoo:
                print(f"{m.name}: {m.description} [checker: {m.checker}; sim: {m.sim}]")
            return 0
        mutants, suite = validate(args, zoo)
    except BadInput as e:
        print(f"pschaos selftest: {e}", file=sys.stderr)
        return 2
    broken = {m.name: patch_problems(REPO, m.patch) for m in mutants}
    broken = {k: v for k, v in broken.items() if v}
    if broken:       # loudly, before anything runs: the code moved under these mutants
        for name, why in broken.items():
            print(f"pschaos selftest: mutant {name} does not apply: {'; '.join(why)}", file=sys.stderr)
        print("pschaos selftest: update tests/zoo/registry.py to the code as it is now", file=sys.stderr)
        return 2
    seeds = list(range(1, args.seeds + 1))
    out = (Path(args.out) if args.out else Path("out") / f"selftest-{args.backend}").resolve()
    from pschaos.harness.fanout.ray_runs import parse_on

    on = parse_on(getattr(args, "on", None))
    if isinstance(on, str):
        print(f"pschaos selftest: {on}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    old_term = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with _pool(on, args, suite) as runner:
            _progress(f"baseline: the unmodified code on {len(suite)} scenario(s) x {len(seeds)} seed(s), "
                      + ("as Ray tasks" if runner else f"{args.par} at a time")
                      + f", --backend {args.backend} -> {out}")
            baseline, planned = run_baseline(suite, seeds, args.backend, out, args.par, args.timeout, runner)
            results: list[MutantResult] = []
            if baseline_verdict(baseline, planned) == "pass":
                _progress(f"baseline passed; {len(mutants)} mutant(s) next")
                with tempfile.TemporaryDirectory(prefix="pschaos-selftest-") as tmp:
                    results = run_mutants(mutants, suite, seeds, args.backend, out, Path(tmp), args.par,
                                          args.timeout, runner)
        rep = report(args.backend, suite, seeds, baseline, planned, results, time.monotonic() - t0)
    except HarnessError as e:
        print(f"pschaos selftest: {e}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, old_term)
    path = write(rep, out)
    print(json.dumps(rep, default=str) if args.json else text(rep) + f"\n  -> {path}")
    return exit_code(rep, args.min_score)


@contextlib.contextmanager
def _pool(on: tuple[bool, str | None], args: argparse.Namespace, suite: list[str]) -> Iterator[Callable | None]:
    """None (runs here, exec.run_queues), or Ray's runner over a pool held for the whole selftest;
    a suite with a scenario no node can run is refused before any run (HarnessError)."""
    if not on[0]:
        yield None
        return
    from pschaos.harness.fanout.ray_runs import RayPool
    from pschaos.harness.proof.selftest.on_ray import refuse_unplaceable, run_queues_on_ray

    zoo = load_zoo(Path(args.zoo)) if args.zoo else load_zoo()
    patches = {None: None, **{m.name: m.patch for m in zoo}}
    with RayPool(on[1], max(1, args.par), args.backend, _progress) as pool:
        refuse_unplaceable(pool, suite, args.backend)
        yield functools.partial(run_queues_on_ray, pool, patches)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C: stop the runs, remove the copies (the callers' finally blocks)."""
    raise KeyboardInterrupt
