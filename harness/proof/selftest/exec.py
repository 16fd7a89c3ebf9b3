"""Running selftest's `pschaos run`s: queues of runs, PAR at a time, each a subprocess of its own.

Every run is `pschaos run SCENARIO --seed S --quiet` started with PYTHONPATH and the working
folder at a code tree (the checkout for the baseline, a mutant's temporary copy otherwise), in a
session of its own so that stopping it (SIGINT, then SIGKILL of the group: harness/proof/soak/soak.py's
`_stop`) tears its cluster down. The queues are per mutant: while several mutants have work,
each gets at most one run at a time (so "the first run that killed it" follows the mutant's own
order), and a queue is dropped, its running siblings stopped, as soon as its verdict is known.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pschaos.harness.proof.selftest.score import RunOutcome, outcome_from_report
from pschaos.harness.proof.soak.soak import _stop

SIBLING_GRACE_S = 30.0     # a run stopped because its mutant is already decided


@dataclass
class Task:
    key: str | None            # the mutant's name; None for the baseline
    scenario: str
    seed: int
    root: Path                 # the code tree the run imports
    dir: Path                  # its output folder


@dataclass
class _Running:
    task: Task
    proc: subprocess.Popen
    t0: float


def command(task: Task, backend: str) -> list[str]:
    return [sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(task.root / "scenarios" / f"{task.scenario}.yaml"),
            "--backend", backend, "--seed", str(task.seed), "--out", str(task.dir), "--quiet"]


def start(task: Task, backend: str) -> subprocess.Popen:
    task.dir.mkdir(parents=True, exist_ok=True)
    (task.dir / "report.json").unlink(missing_ok=True)       # never read a stale verdict
    env = dict(os.environ, PYTHONPATH=str(task.root))
    with open(task.dir / "selftest-run.log", "wb") as log:
        return subprocess.Popen(command(task, backend), cwd=task.root, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)


def judge(task: Task, rc: int | None, wall_s: float, timed_out: bool) -> RunOutcome:
    """The run's outcome from its report.json; no report (crash, timeout) is unknown."""
    o = RunOutcome(task.key, task.scenario, task.seed, task.dir, wall_s=round(wall_s, 1))
    path = task.dir / "report.json"
    if timed_out:
        return outcome_from_report(o, None, f"timed out after {wall_s:.0f} s (see {task.dir / 'selftest-run.log'})")
    try:
        rep = json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError) as e:
        return outcome_from_report(o, None, f"unreadable report.json: {e}")
    return outcome_from_report(o, rep, None if rep else f"no report.json (exit code {rc}; see "
                                                          f"{task.dir / 'selftest-run.log'})")


def _next(queues: dict[str | None, deque[Task]], running: list[_Running]) -> Task | None:
    """A queue with no run in flight first (in queue order), else any queue with work left."""
    busy = {r.task.key for r in running}
    for key, q in queues.items():
        if q and key not in busy:
            return q.popleft()
    for q in queues.values():
        if q:
            return q.popleft()
    return None


def run_queues(queues: dict[str | None, deque[Task]], par: int, backend: str, timeout_s: float,
               on_outcome: Callable[[RunOutcome], str | None]) -> None:
    """Run every queue to its end, PAR runs at a time. `on_outcome` is told each finished run and
    answers None (go on), "queue" (this queue is decided: drop it and stop its runs) or "all"."""
    running: list[_Running] = []
    try:
        while running or any(queues.values()):
            while len(running) < par:
                task = _next(queues, running)
                if task is None:
                    break
                running.append(_Running(task, start(task, backend), time.monotonic()))
            time.sleep(0.2)
            for r in list(running):
                if r not in running:
                    continue           # stopped meanwhile, as the sibling of a decided run
                elapsed = time.monotonic() - r.t0
                if r.proc.poll() is None and elapsed < timeout_s:
                    continue
                timed_out = r.proc.returncode is None
                if timed_out:
                    _stop(r.proc)
                running.remove(r)
                decided = on_outcome(judge(r.task, r.proc.returncode, elapsed, timed_out))
                if decided in ("queue", "all"):
                    for key in ([r.task.key] if decided == "queue" else list(queues)):
                        queues.get(key, deque()).clear()
                    for s in [s for s in running if decided == "all" or s.task.key == r.task.key]:
                        _stop(s.proc, SIBLING_GRACE_S)
                        running.remove(s)
    except BaseException:
        for r in running:          # Ctrl-C, SIGTERM: every run tears its cluster down
            _stop(r.proc)
        raise
