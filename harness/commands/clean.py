"""`pschaos clean`: reap what killed runs left behind: processes (etcd, nodes, workers, Toxiproxy
with all its proxies) by their run tag, nftables tables by the run registry, and a docker run's
containers, volumes and run images by their labels (harness/backends/docker/reap.py), the
Debian rootfs a killed image build left in /var/tmp, power-loss disks whose serving process died
(diskfaults/mounts.py), and the folders of Ray tasks and local Ray
clusters whose owners died (harness/fanout/leftovers.py)."""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from pschaos.diskfaults.mounts import reap as reap_disks
from pschaos.netfaults import nft

from pschaos.harness.fanout.leftovers import remove_dead
from pschaos.harness.machinery import registry
from pschaos.harness.backends.docker.debian import remove_rootfs, stale_rootfs
from pschaos.harness.backends.docker.reap import engine_runs, reap_engine
from pschaos.harness.machinery.procs import RUN_ENV, orphaned, owner_alive, reap, tagged_processes


STARTING_S = 180.0      # a detached cluster this young may not have started a process yet (cluster up: 120 s)
ROOTFS_STALE_S = 3600.0  # an image build's rootfs older than this is a killed build's (a build takes ~70 s)


def _owner_alive(r: dict, alive: set[str] | None = None) -> bool:
    """A run whose owner lives. A detached cluster (owner -1) has no owner to outlive: it lives
    while one of its processes or containers does (`alive`: those run ids; None: unknown, kept),
    and while it is young enough to be still starting."""
    if r["owner"] == -1:
        young = isinstance(r.get("registered"), (int, float)) and time.time() - r["registered"] < STARTING_S
        return alive is None or young or r["run_id"] in alive
    return owner_alive(r["owner"], r.get("owner_start"))


def _same_user(p) -> bool:
    try:
        return p.uids().real == os.getuid()
    except Exception:  # noqa: BLE001 - unknowable: assume it could be ours
        return True


def _alive_runs() -> set[str] | None:
    """Run ids some process or container carries now; None when that cannot be told (a process
    whose environment we may not read, an engine that does not answer)."""
    import psutil

    ids: set[str] = set()
    for p in psutil.process_iter(["pid"]):
        try:
            rid = p.environ().get(RUN_ENV)
        except psutil.AccessDenied:
            if p.pid != 1 and _same_user(p):      # one of ours we cannot read: could be a cluster's
                return None
            continue
        except (psutil.Error, OSError):
            continue
        if rid:
            ids.add(rid)
    in_engine = engine_runs()
    return None if in_engine is None else ids | in_engine


def _ours(folder: str) -> bool:
    """Only a folder a run made under the temp folder (`pschaos-`...): a registry file someone
    edited cannot point clean at anything else."""
    p = Path(folder)
    return p.parent == Path(tempfile.gettempdir()) and p.name.startswith("pschaos-")


def remove_folders(run: dict) -> list[str]:
    """Remove what a dead run made outside its --out (its registry entry's `folders`)."""
    gone = []
    for d in run.get("folders", []):
        if _ours(d) and Path(d).exists():
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone


def clean(all_runs: bool = False) -> int:
    known = {r["run_id"] for r in registry.runs()}     # read first: a run registered later is not judged
    alive = _alive_runs()
    procs = [p for p in tagged_processes() if all_runs or orphaned(p)]

    def dead(r: dict) -> bool:
        return all_runs or (r["run_id"] in known and not _owner_alive(r, alive))

    done = reap(procs)
    for d in done:
        print(f"reaped {d}")
    live_tables = {r["nft_table"] for r in registry.runs() if not dead(r)}
    dropped = []
    for t in nft.tables():
        if t not in live_tables:
            try:
                nft.delete_table(t)
                dropped.append(t)
                print(f"deleted nftables table inet {t}")
            except Exception as e:  # noqa: BLE001 - report and go on with the rest
                print(f"could not delete table {t}: {e}")
    disks = reap_disks(all_mounts=all_runs)     # after the processes: a reaped server unmounts its own
    for d in disks:
        print(f"unmounted power-loss disk {d}")
    engine, problems, unchecked = reap_engine(all_runs)
    if unchecked:
        print(f"docker: {unchecked}")
    for line in engine:
        print(f"removed {line}")
    for line in problems:
        print(f"could not remove: {line}")
    removed = []
    for d in stale_rootfs():        # a killed image build's Debian rootfs (harness/backends/docker/debian.py)
        if all_runs or time.time() - d.stat().st_mtime > ROOTFS_STALE_S:
            try:
                remove_rootfs(d)
                removed.append(str(d))
                print(f"removed {d}")
            except Exception as e:  # noqa: BLE001 - still mounted: said, and the rest goes on
                problems.append(f"{d}: {e}")
    for d in remove_dead():         # Ray tasks' and local Ray clusters' folders whose owners died (harness/fanout)
        removed.append(d)
        print(f"removed {d}")
    for r in registry.runs():
        if dead(r):
            for d in remove_folders(r):
                removed.append(d)
                print(f"removed {d}")
            try:
                registry.unregister(r["run_id"])
            except OSError as e:        # another user's entry: said, and the rest goes on
                print(f"could not remove the registry entry of {r['run_id']}: {e}")
    print(f"pschaos clean: {len(done)} process(es) reaped, {len(dropped)} nftables table(s) deleted, "
          f"{len(disks)} power-loss disk(s) unmounted, "
          f"{len(engine)} container(s), volume(s) and image(s) removed, {len(removed)} folder(s) removed"
          + (f", {len(problems)} run(s) left on the engine" if problems else ""))
    return 1 if problems else 0
