"""One scenario run as a Ray task: what runs on the node (harness/fanout/ray_runs.py submits it).

It does on its node what the local soak does here: `pschaos run SCENARIO --seed S --backend B
--quiet` in a process of its own session and folder, with a timeout (SIGINT, then SIGKILL). The
scenario travels as text, so a node needs only pschaos installed (a process-backend run also
etcd, Toxiproxy and nftables). It returns the exit code, the wall time, its node, the version of
pschaos that ran it, the log's tail and the run's files: report.json and summary.md of a run
that passed, every file of one that did not (a tar, to read on the driver's machine).

The run must be able to tear its cluster down whatever happens to the task: a Ray worker runs
tasks with SIGINT blocked, and the mask survives exec (the run ignored every Ctrl-C), so the
child unblocks it and restores the default handlers; it gets SIGINT from the kernel when its
worker dies (PR_SET_PDEATHSIG); and a cancel (KeyboardInterrupt in the task) passes SIGINT on
and waits for the teardown.
"""
from __future__ import annotations

import base64
import ctypes
import functools
import hashlib
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

from pschaos.harness.fanout.leftovers import CLI_MODULE, TASK_PREFIX, claim, sweep
from pschaos.harness.machinery.procs import interrupt_group

INTERRUPT_GRACE_S = 60.0     # a cancelled run's time to tear down
LOG_TAIL = 4000              # characters of a run's log that come back with it
PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)      # loaded here, not between fork and exec


def _die_with_parent(parent: int) -> None:
    """In the child, before exec: its own session, SIGINT deliverable and handled by default,
    and SIGINT when the worker dies (at once if it died during the fork)."""
    os.setsid()
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGINT)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGINT)


def pack(folder: Path, everything: bool) -> dict[str, str]:
    """The run's files, base64: report.json and summary.md, or every file (a tar) when asked."""
    if not everything:
        return {n: base64.b64encode((folder / n).read_bytes()).decode() for n in ("report.json", "summary.md")
                if (folder / n).is_file()}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=".")
    return {"run.tar.gz": base64.b64encode(buf.getvalue()).decode()}


CODE_DIRS = ("pschaos", "harness", "psnodes", "netfaults", "diskfaults", "reports")


@functools.lru_cache(maxsize=8)
def code_digest(root: str) -> str:
    """A digest of the Python code under `root` (a checkout, or the folder that holds an installed
    pschaos): two trees that judge a seed alike have the same one, whatever their metadata says."""
    h = hashlib.sha256()
    base = Path(root)
    installed = (base / "pschaos" / "harness").is_dir()         # a wheel: everything inside pschaos/
    for d in ("pschaos",) if installed else CODE_DIRS:
        for f in sorted((base / d).rglob("*.py")) if (base / d).is_dir() else ():
            if "__pycache__" not in f.parts:
                h.update(str(f.relative_to(base)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def version(root: str = "") -> str:
    """pschaos' version and the digest of its code (`root`: a tree a run will import; default the
    one this process imported): the package metadata alone is the same for every commit and
    every mutant copy."""
    import pschaos

    here = root or os.path.dirname(os.path.dirname(os.path.abspath(pschaos.__file__)))
    return f"{pschaos.__version__}+{code_digest(here)}"


def run_on_node(name: str, text: str, seed: int, backend: str, timeout_s: float, pythonpath: str = "") -> dict:
    """The body of one task (the tests call it directly too): one `pschaos run` on this node."""
    where = {"node": "", "host": socket.gethostname(),
             "version": version(pythonpath if pythonpath and Path(pythonpath).is_dir() else "")}
    try:
        import ray
        where["node"] = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside a task (tests): no node id
        pass
    sweep()
    p: subprocess.Popen | None = None
    with tempfile.TemporaryDirectory(prefix=TASK_PREFIX) as tmp:
        claim(Path(tmp), os.getpid())
        folder, scenario = Path(tmp) / "run", Path(tmp) / f"{name}.yaml"
        scenario.write_text(text)
        env = dict(os.environ)
        if pythonpath and Path(pythonpath).is_dir():
            env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        argv = [sys.executable, "-m", CLI_MODULE, "run", str(scenario), "--backend", backend, "--seed", str(seed),
                "--out", str(folder), "--quiet"]
        t0, timed_out, me = time.monotonic(), False, os.getpid()
        with open(Path(tmp) / "run.log", "wb") as log:
            try:
                # in the task's own folder: `python -m` puts the working folder first on the path, and a
                # Ray worker's is the driver's (a checkout there would shadow the code asked for)
                p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp,
                                     preexec_fn=lambda: _die_with_parent(me))
                claim(Path(tmp), me, p.pid)
                p.wait(timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                interrupt_group(p, INTERRUPT_GRACE_S)
            except KeyboardInterrupt:          # ray.cancel: the run tears its cluster down first
                if p is not None:
                    interrupt_group(p, INTERRUPT_GRACE_S)
                raise
        tail = (Path(tmp) / "run.log").read_text(errors="replace")[-LOG_TAIL:]
        passed = (folder / "report.json").is_file() and p.returncode == 0 and not timed_out
        files = pack(folder, everything=not passed) if folder.is_dir() else {}
    sweep()                    # again at the end: a killed attempt's run may still have been tearing down at the start
    return {"rc": p.returncode, "wall_s": round(time.monotonic() - t0, 1), "timed_out": timed_out,
            "log_tail": tail, "files": files, **where}
