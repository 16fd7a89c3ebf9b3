"""What a killed Ray task or driver leaves on a node, and its removal.

A task works in a folder of its own (`pschaos-task-*` under the temp folder) and a local cluster
in another (`pschaos-ray-*`). Each holds an owners file naming the processes that keep it alive
(a task: its Ray worker and its run; a local cluster: the driver), written whole (a temporary
file renamed into place) before anything can need it. A folder whose owners are all dead is a
leftover: the next task on the node, a driver whose cluster ran on this machine, and
`pschaos clean` remove it. A task folder with no owners file is a task killed while it was being
set up, a leftover once it is older than SETUP_S. A run that died with its worker may also have
left its own cluster (nodes, etcd, Toxiproxy): `sweep` then runs `pschaos clean`, which reaps
only runs whose owner is dead.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASK_PREFIX = "pschaos-task-"
CLUSTER_PREFIX = "pschaos-ray-"
OWNERS = "owners"
SETUP_S = 600.0          # a task folder without owners this old was a task killed while setting up
CLI_MODULE = "pschaos.harness.commands.cli"


def claim(folder: Path, *pids: int) -> None:
    """Name the processes that keep `folder` alive, atomically (a reader never sees half a list)."""
    tmp = folder / (OWNERS + ".tmp")
    tmp.write_text(" ".join(str(p) for p in pids))
    os.replace(tmp, folder / OWNERS)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _dead(folder: Path, now: float) -> bool:
    try:
        pids = [int(x) for x in (folder / OWNERS).read_text().split()]
    except FileNotFoundError:
        try:
            return folder.name.startswith(TASK_PREFIX) and now - folder.stat().st_mtime > SETUP_S
        except OSError:
            return False
    except (OSError, ValueError):
        return False              # unreadable: not ours to judge
    return bool(pids) and not any(alive(p) for p in pids)


def remove_dead(base: Path | None = None) -> list[str]:
    """Remove the task and local-cluster folders whose owners are all dead; the names removed."""
    gone, now = [], time.time()
    root = Path(base or tempfile.gettempdir())
    for d in [*root.glob(TASK_PREFIX + "*"), *root.glob(CLUSTER_PREFIX + "*")]:
        if d.is_dir() and _dead(d, now):
            shutil.rmtree(d, ignore_errors=True)
            gone.append(str(d))
    return gone


def sweep(base: Path | None = None) -> list[str]:
    """`remove_dead`, and `pschaos clean` when a task folder was among them (its run may have
    died without tearing its cluster down)."""
    gone = remove_dead(base)
    if any(Path(g).name.startswith(TASK_PREFIX) for g in gone):
        subprocess.run([sys.executable, "-m", CLI_MODULE, "clean"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120, check=False)
    return gone


def sweep_here(wait_s: float = 30.0) -> None:
    """The cluster ran on this machine: sweep until no task folder is left (runs killed with
    their workers take a moment to tear down), at most `wait_s`."""
    end = time.monotonic() + wait_s
    while True:
        sweep()
        if not list(Path(tempfile.gettempdir()).glob(TASK_PREFIX + "*")) or time.monotonic() > end:
            return
        time.sleep(0.2)
