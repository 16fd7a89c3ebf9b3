"""Scenario runs fanned out as Ray tasks: the driver side of `pschaos soak --on ray[=ADDRESS]`.

Seeds are independent, so a soak fans out on the engine ML-infrastructure teams already run.
Each run is one task of one CPU (harness/fanout/task.py), pinned to a node that lacks nothing
for its backend (harness/fanout/nodes.py asks every node first); as many are in flight on each
as it has CPUs, the rest wait here. Each result is written under the run's folder (out/seed-S) as a
local run's would be, its old contents first removed, its report's `rerun` made the command for
this machine, and judged by the soak's own judge, so the same seeds give the same verdicts.

Fail closed: a task lost with its node or worker is retried once by Ray (`max_retries=1`), and
one lost twice, a result that cannot be written, or one from another pschaos version is
`unknown` with the reason, never a pass. Ctrl-C interrupts every task (its run gets SIGINT and
tears its cluster down), waits for them, then forces the rest; a cluster on this machine is then
swept of what killed tasks left (harness/fanout/leftovers.py).
"""
from __future__ import annotations

import base64
import io
import json
import shutil
import tarfile
import time
from pathlib import Path
from typing import Any, Callable

from pschaos.harness.errors import HarnessError
from pschaos.harness.fanout import leftovers
from pschaos.harness.fanout.local_ray import LocalRay, import_ray
from pschaos.harness.fanout.task import INTERRUPT_GRACE_S, run_on_node, version
from pschaos.harness.machinery.registry import made_by_a_run
from pschaos.harness.machinery.tools import CHECKOUT, REPO

CANCEL_GRACE_S = INTERRUPT_GRACE_S + 15.0     # longer than a task's own wait for its run's teardown
# a run's task not back this long past its run's own bound (a node that is alive but never starts
# it: its CPUs held by another job, a worker that cannot start) is cancelled and unknown, so a
# pinned task can never hold a soak forever
START_WAIT_S = 600.0


def deadline(timeout_s: float) -> float:
    """How long a run's task may take from being sent: its run's bound and teardown, twice (Ray
    retries a task whose worker died once, on the same node), and START_WAIT_S to start."""
    return 2 * (timeout_s + CANCEL_GRACE_S + 60.0) + START_WAIT_S
RUN_FILES = ("report.json", "summary.md", "report.html", "history.jsonl", "junit.xml", "soak-run.log",
             "lost-updates.jsonl")


def parse_on(value: str | None) -> tuple[bool, str | None] | str:
    """`--on ray` -> (True, None: a local cluster), `--on ray=ADDRESS` -> (True, ADDRESS), no
    --on -> (False, None); anything else -> the error to print (exit 2)."""
    if value is None:
        return False, None
    engine, _, address = value.partition("=")
    if engine != "ray" or ("=" in value and not address) or address == "local":
        return (f"--on {value}: only Ray is supported: --on ray (a local cluster on 127.0.0.1) or "
                "--on ray=ADDRESS (e.g. --on ray=auto on a node of your cluster, or ray://HEAD:10001)")
    return True, address or None


def fresh(folder: Path) -> None:
    """A run's folder before its task: what an earlier run left there removed (its `run/` only
    when a run made it), so no old file stands beside the new result."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in RUN_FILES:
        (folder / name).unlink(missing_ok=True)
    run = folder / "run"
    if run.is_dir() and made_by_a_run(run):
        shutil.rmtree(run, ignore_errors=True)


def unpack(result: dict, folder: Path, command: str) -> None:
    """Write a task's files into `folder`, its log as soak-run.log, and the report's `rerun` as
    the command that reruns it here (the node's folder is gone)."""
    (folder / "soak-run.log").write_text(result.get("log_tail", ""))
    for name, data in (result.get("files") or {}).items():
        raw = base64.b64decode(data, validate=True)
        if name == "run.tar.gz":
            with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
                tar.extractall(folder, filter="data")
        else:
            (folder / Path(name).name).write_bytes(raw)
    report = folder / "report.json"
    if report.is_file():
        rep = json.loads(report.read_text())
        rep["rerun"] = command
        rep["ray_node"] = result.get("node", "")
        report.write_text(json.dumps(rep, indent=2))


def connect(address: str | None, cpus: int) -> tuple[Any, LocalRay | None]:
    """Ray connected: to ADDRESS, or to a new local cluster (one node, `cpus` CPUs, 127.0.0.1).
    One that cannot be reached is bad input (HarnessError: exit 2), never a traceback."""
    ray = import_ray()
    if not address:
        return ray, LocalRay(nodes=1, cpus=cpus).start()
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except Exception as e:  # noqa: BLE001 - Ray says why in many types
        raise HarnessError(f"--on ray={address}: cannot connect to a Ray cluster there ({type(e).__name__}: "
                           f"{str(e).splitlines()[0][:200] if str(e) else ''}); run pschaos on a node of the "
                           "cluster with --on ray=auto, or give its Ray Client address (ray://HEAD:10001)") from None
    return ray, None


def execute_on_ray(scenario: Path, plan: list[tuple[int, int]], run_dir: Callable[[int, int], Path], backend: str,
                   timeout_s: float, address: str | None, cpus: int, make_result: Callable[..., Any],
                   judge: Callable[[Any], Any], progress: Callable[[str], None] = lambda m: None,
                   command: Callable[[int, Path], str] = lambda s, d: "") -> list:
    """Run the plan (one scenario, many seeds) as Ray tasks: RayPool.run's jobs."""
    text, name = scenario.read_text(), scenario.stem
    with RayPool(address, cpus, backend, progress) as pool:
        return pool.run([(seed, k, name, text) for seed, k in plan], run_dir, timeout_s, make_result, judge, command)


class RayPool:
    """A connection to a Ray cluster (or a local one it starts), its nodes asked what they can
    run (nodes.py), for one backend: `run` sends jobs as tasks pinned to nodes that lack nothing
    for it, as many in flight on each as it has CPUs. Leaving it disconnects (and stops a local
    cluster) and sweeps what killed tasks left on this machine."""

    def __init__(self, address: str | None, cpus: int, backend: str,
                 progress: Callable[[str], None] = lambda m: None) -> None:
        self.address, self.cpus, self.backend, self.progress = address, cpus, backend, progress
        self.overdue: dict[Any, str] = {}        # a task's ref -> why it was cancelled unfinished (this drive's)
        self.clock: Callable[[], float] = time.monotonic      # the deadline's clock (a test's own)

    def __enter__(self) -> "RayPool":
        from pschaos.harness.fanout.nodes import Placer, describe, placeable, survey

        self.ray, self.local = connect(self.address, self.cpus)
        try:
            self.mine, backend = version(), self.backend
            self.reports = reports = survey(self.ray)
            self.placer = Placer(placeable(reports, backend, self.mine))
            if not self.placer.width:
                raise HarnessError(f"--on ray: no node of the cluster can run a {backend} run: "
                                   f"{describe(reports, backend, self.mine)} (pschaos doctor --on ray says what each "
                                   "node lacks)")
            left_out = [r for r in reports if r["node"] not in self.placer.slots]
            self.progress(f"Ray at {self.address or 'a local cluster on 127.0.0.1'}: {self.placer.width} CPU(s) on "
                          f"{len(self.placer.slots)} node(s)" + (f"; left out, lacking parts for a {backend} run: "
                                                                  f"{describe(left_out, backend, self.mine)}"
                                                                  if left_out else ""))
        except BaseException:
            disconnect(self.ray, self.local, self.address)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        disconnect(self.ray, self.local, self.address)

    @property
    def width(self) -> int:
        return self.placer.width

    def allowed(self, needs: tuple[str, ...]) -> set[str] | None:
        """The placed nodes that also have `needs` (nodes.run_needs): None for any placed node."""
        from pschaos.harness.fanout.nodes import lacks

        if not needs:
            return None
        by_node = {r["node"]: r for r in self.reports}
        return {n for n in self.placer.slots if not lacks(by_node[n], self.backend, self.mine, needs)}

    def unplaceable(self, needs: tuple[str, ...]) -> str:
        """Why no node can run a run that needs `needs` (for its unknown)."""
        from pschaos.harness.fanout.nodes import describe

        gone = [r for r in self.reports if r["cpus"] > 0 and r["node"] not in self.placer.slots]
        alive = [r for r in self.reports if r not in gone]
        return (f"no node of the Ray cluster has {', '.join(needs)} for this scenario: "
                f"{describe(alive, self.backend, self.mine, needs)}"
                + (f"; gone since the start or left out: {describe(gone, self.backend, self.mine, needs)}" if gone else "")
                + " (pschaos doctor --on ray says what each node lacks)")

    def _drive(self, fn: Callable[..., Any], items: list, args: Callable[[Any], tuple],
               finish: Callable[[Any, Any, int, int], None], prepare: Callable[[Any], None] = lambda item: None,
               needs_of: Callable[[Any], tuple[str, ...]] = lambda item: (),
               unplaced: Callable[[Any, str], None] | None = None, deadline_s: float | None = None) -> None:
        """Each item as a task of `fn(*args(item))`, pinned to a placed node with a free CPU that
        has what the item needs (`needs_of`; one no node has goes to `unplaced` with the reason);
        `finish(item, ref, in_flight, queued)` as each ends. A task whose
        node died is placed again once on another node (Ray's own retry is pinned to the dead
        one), its node dropped from the placement; one not back `deadline_s` after it was sent
        is cancelled and finished (self.overdue says why); all are cancelled on any exception
        (Ctrl-C, a timeout) and their CPUs given back."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self.ray
        task = ray.remote(num_cpus=1, max_retries=1, retry_exceptions=False)(fn)
        pending, running, moved = list(items), {}, set()
        self.overdue = {}
        try:
            while pending or running:
                i = 0
                while i < len(pending) and self.placer.has_free():
                    item = pending[i]
                    allowed = self.allowed(needs_of(item))
                    if allowed is not None and not allowed:       # no node of the cluster has what it needs
                        pending.pop(i)
                        if unplaced is None:
                            raise HarnessError(f"--on ray: {self.unplaceable(needs_of(item))}")
                        unplaced(item, self.unplaceable(needs_of(item)))
                        continue
                    node = self.placer.take(allowed)
                    if node is None:            # its nodes are busy: a later item may go elsewhere
                        i += 1
                        continue
                    pending.pop(i)
                    prepare(item)
                    pinned = task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
                    running[pinned.remote(*args(item))] = (item, node, self.clock())
                if not running:
                    if not pending:
                        break
                    raise HarnessError(f"--on ray: {len(pending)} run(s) left and no node to place them on: every "
                                       "node that could run them is gone")
                ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
                if deadline_s is not None:
                    ready += self._overdue(running, ready, deadline_s)
                for ref in ready:
                    item, node, _ = running.pop(ref)
                    self.placer.give(node)
                    if id(item) not in moved and ref not in self.overdue and self._lost(ref, node):
                        moved.add(id(item))
                        self.placer.drop(node)
                        self.progress(f"node {node[:12]} is gone: its run goes to another node")
                        pending.insert(0, item)
                        continue
                    refill = min(len(pending), self.placer.free())      # placed the next moment (at most)
                    finish(item, ref, len(running) + refill, len(pending) - refill)
        except BaseException:
            cancel(ray, list(running))
            for _, node, _ in running.values():
                self.placer.give(node)
            raise

    def _overdue(self, running: dict, ready: list, deadline_s: float) -> list:
        """The tasks not back `deadline_s` after they were sent, cancelled (self.overdue says why)."""
        now, late = self.clock(), []
        for ref, (item, node, sent) in running.items():
            if ref not in ready and now - sent > deadline_s:
                self.overdue[ref] = (f"its Ray task was not back {deadline_s:.0f} s after it was sent to node "
                                     f"{node[:12]} (twice the run's own bound, for Ray's one retry, and "
                                     f"{START_WAIT_S:.0f} s to start): cancelled; is that node's CPU held by another job?")
                late.append(ref)
        if late:
            cancel(self.ray, late)
        return late

    def _lost(self, ref: Any, node: str) -> bool:
        """The task failed and its node is no longer alive."""
        try:
            self.ray.get(ref, timeout=0)
            return False
        except Exception:  # noqa: BLE001 - any failure: was it the node?
            try:
                return not any(n["NodeID"] == node and n.get("Alive") for n in self.ray.nodes())
            except Exception:  # noqa: BLE001 - no answer about the node: the task's own failure stands
                return False

    def map(self, fn: Callable[..., Any], calls: list[tuple], progress: Callable[[int, Any], None] = lambda i, r: None
            ) -> list[Any]:
        """fn(*call) for each call as a task of one CPU on a placed node, results in the calls'
        order; `progress(index, result)` as each arrives. A task that failed twice raises
        HarnessError naming the call: a function's result has no unknown to stand for it."""
        out: list[Any] = [None] * len(calls)

        def finish(i: int, ref: Any, in_flight: int, queued: int) -> None:
            try:
                out[i] = self.ray.get(ref)
            except Exception as e:  # noqa: BLE001 - lost twice, or the function raised there
                raise HarnessError(f"--on ray: task {i + 1} of {len(calls)} ({calls[i]!r:.200}) failed: "
                                   f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}") from None
            progress(i, out[i])
        self._drive(fn, list(range(len(calls))), lambda i: calls[i], finish)
        return out

    def run(self, jobs: list[tuple[int, int, str, str]], run_dir: Callable[[int, int], Path], timeout_s: float,
            make_result: Callable[..., Any], judge: Callable[[Any], Any],
            command: Callable[[int, Path], str] = lambda s, d: "") -> list:
        """Each job (seed, k, scenario name, scenario text) as a task; each result judged as it
        arrives (`judge`, on a `make_result(seed, k, dir)`), in the order they arrive."""
        from pschaos.harness.fanout.nodes import run_needs

        pythonpath = str(REPO) if CHECKOUT else ""
        done: list = []
        needs = {text: run_needs(text, self.backend) for text in {j[3] for j in jobs}}

        def report(seed: int, r: Any, in_flight: int, queued: int) -> None:
            done.append(judge(r))
            r = done[-1]
            self.progress(f"{len(done)}/{len(jobs)} done, {in_flight} in flight, {queued} queued: seed={seed} "
                          f"{r.verdict.upper()} ({r.wall_s:.0f} s)" + (f": {r.reason}" if r.reason and r.verdict != "pass" else ""))

        def finish(job: tuple, ref: Any, in_flight: int, queued: int) -> None:
            seed, k, _, _ = job
            d = run_dir(seed, k)
            late = self.overdue.get(ref)
            # a cancelled task's get is bounded: a node that never started it may never answer for it
            r = _result(self.ray, ref, make_result(seed, k, d), self.mine, command(seed, d), 5.0 if late else None)
            if late and r.rc is None:     # cancelled unfinished (a result that came back stands)
                r.reason = late
            report(seed, r, in_flight, queued)

        def unplaced(job: tuple, why: str) -> None:
            seed, k, _, _ = job
            fresh(run_dir(seed, k))
            r = make_result(seed, k, run_dir(seed, k))
            r.reason = why
            report(seed, r, 0, 0)
        self._drive(run_on_node, list(jobs), lambda j: (j[2], j[3], j[0], self.backend, timeout_s, pythonpath), finish,
                    prepare=lambda j: fresh(run_dir(j[0], j[1])), needs_of=lambda j: needs[j[3]], unplaced=unplaced,
                    deadline_s=deadline(timeout_s))
        return done


def disconnect(ray: Any, local: LocalRay | None, address: str | None) -> None:
    """Leave the cluster (stop it when it is ours) and sweep what killed tasks left on this machine."""
    try:
        if local is not None:
            local.stop()
        elif ray.is_initialized():
            ray.shutdown()
    finally:
        if local is not None or (address or "").split(":")[0] in ("127.0.0.1", "localhost"):
            leftovers.sweep_here()


def _result(ray: Any, ref: Any, r: Any, mine: str, command: str, timeout_s: float | None = None) -> Any:
    """The task's result on `r` (a RunResult): its figures first, then its files; anything that
    goes wrong leaves no report.json behind, so the judge says unknown with the reason."""
    try:
        res = ray.get(ref) if timeout_s is None else ray.get(ref, timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 - lost twice, or the task itself failed
        r.reason = f"the Ray task failed ({type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]})"
        return r
    r.rc, r.wall_s, r.timed_out, r.where = res["rc"], res["wall_s"], res["timed_out"], res["node"]
    try:
        unpack(res, r.dir, command)
    except Exception as e:  # noqa: BLE001 - a bad archive, a full disk
        (r.dir / "report.json").unlink(missing_ok=True)
        r.reason = f"its files could not be written here ({type(e).__name__}: {e})"
        return r
    if res.get("version") != mine:
        (r.dir / "report.json").unlink(missing_ok=True)
        r.reason = (f"run by pschaos {res.get('version')} on its node, not {mine} as here: the same seed may judge "
                    "differently; install the same pschaos on every node")
    return r


def cancel(ray: Any, refs: list, grace: float = CANCEL_GRACE_S) -> None:
    """Interrupt every task (its run gets SIGINT and tears down), wait, then force the rest; a
    Ray that no longer answers is left to its own shutdown."""
    try:
        for ref in refs:
            ray.cancel(ref, force=False)
        end = time.monotonic() + grace
        left = list(refs)
        while left and time.monotonic() < end:
            _, left = ray.wait(left, num_returns=len(left), timeout=1.0)
        for ref in left:
            ray.cancel(ref, force=True)
    except Exception:  # noqa: BLE001 - Ray itself went down with the Ctrl-C
        pass
