"""`pschaos selftest --on ray`: the baseline's and the mutants' runs as Ray tasks.

Each run is one task (harness/fanout/ray_runs.py RayPool: placed on a node that lacks nothing for
the backend), which makes the mutant's copy on its node from that node's own pschaos and the
mutant's patch (mutation.py mutant_copy: a checkout or an installed package alike), runs the
scenario there with that copy first on its path, and sends the run's files back into the run's
folder here. The queues keep exec.py's rules: while several mutants have work each has at most
one run in flight, and a queue whose verdict is known is dropped and its runs cancelled (SIGINT:
their clusters tear down). A task lost twice, or one that brought no report back, is unknown.
"""
from __future__ import annotations

import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from pschaos.harness.proof.selftest.exec import Task, judge
from pschaos.harness.proof.selftest.score import RunOutcome
from pschaos.harness.run import library


def run_patched(patch: dict | None, name: str, text: str, seed: int, backend: str, timeout_s: float) -> dict:
    """On a node: the run, on this node's pschaos, or on a copy of it with `patch` applied."""
    from pschaos.harness.fanout.task import run_on_node
    from pschaos.harness.machinery.tools import CHECKOUT, REPO
    from pschaos.harness.proof.selftest.mutation import mutant_copy

    if not patch:
        return run_on_node(name, text, seed, backend, timeout_s, str(REPO) if CHECKOUT else "")
    with tempfile.TemporaryDirectory(prefix="pschaos-selftest-node-") as tmp:
        root = mutant_copy(Path(tmp) / "code", patch)
        return run_on_node(name, text, seed, backend, timeout_s, str(root))


class _Flight:
    def __init__(self, task: Task, node: str) -> None:
        self.task, self.node, self.t0 = task, node, time.monotonic()
        self.late = ""          # why it was cancelled unfinished (ray_runs.deadline passed)


def refuse_unplaceable(pool: Any, suite: list[str], backend: str) -> None:
    """Before any run: a suite scenario no node of the cluster has the parts for is bad input
    (HarnessError), never a baseline run that fails where it lands."""
    from pschaos.harness.errors import HarnessError
    from pschaos.harness.fanout.nodes import run_needs

    for name in suite:
        needs = run_needs(library.path_of(name).read_text(), backend)
        if (allowed := pool.allowed(needs)) is not None and not allowed:
            raise HarnessError(f"--on ray: {name}: {pool.unplaceable(needs)}; leave it out of the suite "
                               "(--scenarios A,B,...: the ones to run)")


def run_queues_on_ray(pool: Any, patches: dict[str | None, dict | None], queues: dict[str | None, deque[Task]],
                      par: int, backend: str, timeout_s: float,
                      on_outcome: Callable[[RunOutcome], str | None]) -> None:
    """exec.run_queues' contract, each run a task on `pool` (`par` is the pool's width here)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from pschaos.harness.fanout.nodes import run_needs
    from pschaos.harness.fanout.ray_runs import cancel, deadline, fresh
    from pschaos.harness.proof.selftest.exec import _next

    ray = pool.ray
    remote = ray.remote(num_cpus=1, max_retries=1, retry_exceptions=False)(run_patched)
    running: dict[Any, _Flight] = {}
    moved: set[int] = set()
    try:
        while running or any(queues.values()):
            while (task := _next(queues, list(running.values()))) is not None:
                text = library.path_of(task.scenario).read_text()
                allowed = pool.allowed(run_needs(text, backend))
                if allowed is not None and not allowed:      # its nodes died since refuse_unplaceable
                    from pschaos.harness.errors import HarnessError
                    raise HarnessError(f"--on ray: {task.scenario}: {pool.unplaceable(run_needs(text, backend))}")
                node = pool.placer.take(allowed)
                if node is None:
                    queues[task.key].appendleft(task)
                    if not running:
                        from pschaos.harness.errors import HarnessError
                        raise HarnessError("--on ray: runs left and no node to place them on: every node that "
                                           "could run them is gone")
                    break
                fresh(task.dir)
                ref = remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(
                    patches.get(task.key), task.scenario, text, task.seed, backend, timeout_s)
                running[ref] = _Flight(task, node)
            ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0) if running else ([], [])
            ready = list(ready) + _overdue(ray, running, ready, deadline(timeout_s))
            for ref in ready:
                f = running.pop(ref, None)
                if f is None:
                    continue
                pool.placer.give(f.node)
                if not f.late and id(f.task) not in moved and pool._lost(ref, f.node):     # its node died: once more elsewhere
                    moved.add(id(f.task))
                    pool.placer.drop(f.node)
                    queues[f.task.key].appendleft(f.task)
                    continue
                decided = on_outcome(_outcome(ray, ref, f))
                if decided in ("queue", "all"):
                    for key in ([f.task.key] if decided == "queue" else list(queues)):
                        queues.get(key, deque()).clear()
                    siblings = [r for r, s in running.items() if decided == "all" or s.task.key == f.task.key]
                    cancel(ray, siblings)
                    for r in siblings:
                        pool.placer.give(running.pop(r).node)
    except BaseException:
        cancel(ray, list(running))
        for f in running.values():
            pool.placer.give(f.node)
        raise


def _overdue(ray: Any, running: dict[Any, _Flight], ready: list, limit_s: float) -> list:
    """The runs not back `limit_s` after they were sent (a node that never starts them),
    cancelled: their outcome is unknown with the reason, as ray_runs.RayPool's are."""
    from pschaos.harness.fanout.ray_runs import cancel

    now = time.monotonic()
    late = [r for r, f in running.items() if r not in ready and not f.late and now - f.t0 > limit_s]
    for r in late:
        running[r].late = (f"its Ray task was not back {limit_s:.0f} s after it was sent to node {running[r].node[:12]}: "
                           "cancelled; is that node's CPU held by another job?")
    if late:
        cancel(ray, late)
    return late


def _outcome(ray: Any, ref: Any, f: _Flight) -> RunOutcome:
    """A finished task's run judged as exec.judge judges a local one."""
    from pschaos.harness.fanout.ray_runs import unpack

    wall = time.monotonic() - f.t0
    try:
        res = ray.get(ref, timeout=5.0 if f.late else None)     # a cancelled task's node may never answer
    except Exception as e:  # noqa: BLE001 - lost twice, or the task failed on its node
        o = judge(f.task, None, wall, False)
        o.reason = f.late or f"the Ray task failed ({type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]})"
        return o
    unpack(res, f.task.dir, f"pschaos run {f.task.scenario} --seed {f.task.seed}")
    (f.task.dir / "selftest-run.log").write_text(res.get("log_tail", ""))
    return judge(f.task, res.get("rc"), float(res.get("wall_s", wall)), bool(res.get("timed_out")))
