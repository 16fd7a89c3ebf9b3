"""Scenario runs as Ray tasks: `pschaos soak --on ray[=ADDRESS]`.

Seeds are independent, so a soak fans out on the engine ML-infrastructure teams already run.
Each run is one Ray task (one CPU) that does on its node what the local soak does on this
machine: `pschaos run SCENARIO --seed S --backend B --quiet` in a process of its own session,
its own folder, a timeout (SIGINT, then SIGKILL). The scenario travels as text, so a node needs
only pschaos installed (process-backend runs need etcd, Toxiproxy and nftables there too). What
comes back: exit code, wall time, the node that ran it, the log's tail, and the run's files (only
report.json and summary.md of a passing run; every file of one that did not pass, to read
here). The driver writes them under out/seed-S and judges them as the local soak does
(harness/proof/soak/soak.py judge_run), so the same seeds give the same verdicts.

Fail closed: a task lost with its node or worker is retried once by Ray (`max_retries=1`),
and one lost twice is `unknown` with Ray's reason, never dropped. Ctrl-C cancels every task: a
running one is interrupted (its run gets SIGINT and tears its cluster down), then forced; its
child run also gets SIGINT if the worker itself dies (PR_SET_PDEATHSIG).
"""
from __future__ import annotations

import base64
import ctypes
import io
import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pschaos.harness.fanout.local_ray import LocalRay, import_ray
from pschaos.harness.machinery.procs import interrupt_group
from pschaos.harness.machinery.tools import CHECKOUT, REPO

CLI_MODULE = "pschaos.harness.commands.cli"
INTERRUPT_GRACE_S = 60.0     # a cancelled run's time to tear down before its task is forced
LOG_TAIL = 4000              # characters of a run's log that come back with it
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: its own session, SIGINT delivered and handled again (a Ray
    worker runs tasks with SIGINT blocked, and a blocked mask survives exec: the run ignored
    every Ctrl-C and cancel), and SIGINT when the Ray worker dies."""
    os.setsid()
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGINT)
    except (OSError, AttributeError):
        pass


def _pack(folder: Path, everything: bool) -> dict[str, str]:
    """The run's files, base64: report.json and summary.md, or every file (a tar) when asked."""
    if not everything:
        return {n: base64.b64encode((folder / n).read_bytes()).decode() for n in ("report.json", "summary.md")
                if (folder / n).is_file()}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    return {"run.tar.gz": base64.b64encode(buf.getvalue()).decode()}


TASK_PREFIX = "pschaos-task-"
OWNERS = "owners"            # in a task's folder: the pids of the worker and of its run


def sweep_orphans(base: Path | None = None) -> list[str]:
    """Remove task folders whose worker and run are both gone: a worker killed with its task (a
    lost node, a forced cancel) leaves its folder; the next task on the node, and a driver with a
    local cluster at its end, take it away."""
    import shutil

    gone = []
    for d in Path(base or tempfile.gettempdir()).glob(TASK_PREFIX + "*"):
        try:
            pids = [int(x) for x in (d / OWNERS).read_text().split()]
        except (OSError, ValueError):
            continue               # being created, or not ours
        if not any(_alive(pid) for pid in pids):
            shutil.rmtree(d, ignore_errors=True)
            gone.append(str(d))
    if gone:                   # a run that died with its worker may have left its cluster: reap it
        subprocess.run([sys.executable, "-m", CLI_MODULE, "clean"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120, check=False)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_on_node(name: str, text: str, seed: int, backend: str, timeout_s: float, pythonpath: str = "") -> dict:
    """The body of one task (also called directly by the tests): one `pschaos run` on this node."""
    import ray

    where = {"node": "", "host": socket.gethostname()}
    try:
        where["node"] = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - called outside a task (tests): no node id
        pass
    sweep_orphans()
    with tempfile.TemporaryDirectory(prefix=TASK_PREFIX) as tmp:
        folder, scenario = Path(tmp) / "run", Path(tmp) / f"{name}.yaml"
        scenario.write_text(text)
        env = dict(os.environ)
        if pythonpath and Path(pythonpath).is_dir():
            env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        argv = [sys.executable, "-m", CLI_MODULE, "run", str(scenario), "--backend", backend, "--seed", str(seed),
                "--out", str(folder), "--quiet"]
        t0, timed_out = time.monotonic(), False
        with open(Path(tmp) / "run.log", "wb") as log:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent)
            (Path(tmp) / OWNERS).write_text(f"{os.getpid()} {p.pid}")
            try:
                p.wait(timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                interrupt_group(p, INTERRUPT_GRACE_S)
            except KeyboardInterrupt:          # ray.cancel: the run tears its cluster down first
                interrupt_group(p, INTERRUPT_GRACE_S)
                raise
        tail = (Path(tmp) / "run.log").read_text(errors="replace")[-LOG_TAIL:]
        passed = (folder / "report.json").is_file() and p.returncode == 0
        files = _pack(folder, everything=not passed) if folder.is_dir() else {}
    sweep_orphans()            # again at the end: a killed attempt's run may still have been tearing down at the start
    return {"rc": p.returncode, "wall_s": round(time.monotonic() - t0, 1), "timed_out": timed_out,
            "log_tail": tail, "files": files, **where}


def unpack(result: dict, folder: Path) -> None:
    """Write a task's files into `folder` (the run's folder here) and its log as soak-run.log."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (result.get("files") or {}).items():
        raw = base64.b64decode(data)
        if name == "run.tar.gz":
            with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
                tar.extractall(folder, filter="data")
        else:
            (folder / Path(name).name).write_bytes(raw)
    (folder / "soak-run.log").write_text(result.get("log_tail", ""))


def connect(address: str | None, cpus: int) -> tuple[Any, LocalRay | None]:
    """Ray connected: to ADDRESS, or to a new local cluster (one node, `cpus` CPUs, 127.0.0.1)."""
    ray = import_ray()
    if address:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
        return ray, None
    return ray, LocalRay(nodes=1, cpus=cpus).start()


def execute_on_ray(scenario: Path, plan: list[tuple[int, int]], run_dir: Callable[[int, int], Path], backend: str,
                   timeout_s: float, address: str | None, cpus: int, make_result: Callable[..., Any],
                   judge: Callable[[Any], Any], progress: Callable[[str], None] = lambda m: None) -> list:
    """Run the plan as Ray tasks, as many in flight as the cluster has CPUs (the rest queued
    here); each result judged as it arrives (`judge`, on a `make_result(seed, k, dir)`)."""
    ray, local = connect(address, cpus)
    task = ray.remote(num_cpus=1, max_retries=1, retry_exceptions=False)(run_on_node)
    text, name = scenario.read_text(), scenario.stem
    pythonpath = str(REPO) if CHECKOUT else ""
    pending, running, done = list(plan), {}, []
    try:
        width = max(1, int(ray.cluster_resources().get("CPU", 1)))
        progress(f"Ray at {address or 'a local cluster on 127.0.0.1'}: {width} CPU(s), {len(plan)} run(s)")
        while pending or running:
            while pending and len(running) < width:
                seed, k = pending.pop(0)
                d = run_dir(seed, k)
                d.mkdir(parents=True, exist_ok=True)
                (d / "report.json").unlink(missing_ok=True)
                running[task.remote(name, text, seed, backend, timeout_s, pythonpath)] = (seed, k, d)
            ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            for ref in ready:
                seed, k, d = running.pop(ref)
                r = make_result(seed, k, d)
                try:
                    res = ray.get(ref)
                    unpack(res, d)
                    r.rc, r.wall_s, r.timed_out, r.where = res["rc"], res["wall_s"], res["timed_out"], res["node"]
                except Exception as e:  # noqa: BLE001 - lost twice, or the task itself failed
                    r.reason = f"the Ray task failed ({type(e).__name__}: {str(e).splitlines()[0][:300]})"
                done.append(judge(r))
                progress(f"{len(done)}/{len(plan)} done, {len(running)} running, {len(pending)} queued: seed={seed} "
                         f"{r.verdict.upper()} ({r.wall_s:.0f} s)" + (f": {r.reason}" if r.reason and r.verdict != "pass" else ""))
    except KeyboardInterrupt:
        cancel(ray, list(running))
        raise
    finally:
        try:
            if local is not None:
                local.stop()
            elif ray.is_initialized():
                ray.shutdown()
        finally:
            if local is not None or (address or "").split(":")[0] in ("127.0.0.1", "localhost"):
                _sweep_here()
    return done


def _sweep_here(wait_s: float = 30.0) -> None:
    """The cluster ran on this machine: take away what killed tasks left, once their runs (which
    got SIGINT with their worker) finished tearing down."""
    end = time.monotonic() + wait_s
    while True:
        sweep_orphans()
        if not list(Path(tempfile.gettempdir()).glob(TASK_PREFIX + "*")) or time.monotonic() > end:
            return
        time.sleep(0.2)


def cancel(ray: Any, refs: list, grace: float = INTERRUPT_GRACE_S) -> None:
    """Interrupt every task (its run gets SIGINT and tears down), wait, then force the rest. A
    Ctrl-C at a terminal reaches a local cluster's own processes too: once Ray no longer
    answers, its workers are gone, and their runs got SIGINT from the kernel (PR_SET_PDEATHSIG)."""
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
