"""`pschaos clean`: reap what killed runs left behind: processes (etcd, nodes, workers, Toxiproxy
with all its proxies) by their run tag, nftables tables by the run registry, and a docker run's
containers, volumes and run images by their labels (harness/backends/docker/reap.py)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from pschaos.netfaults import nft

from pschaos.harness.machinery import registry
from pschaos.harness.backends.docker.reap import engine_runs, reap_engine
from pschaos.harness.machinery.procs import RUN_ENV, orphaned, owner_alive, reap, tagged_processes


def _owner_alive(r: dict, alive: set[str] | None = None) -> bool:
    """A run whose owner lives. A detached cluster (owner -1) has no owner to outlive: it lives
    while one of its processes or containers does (`alive`: those run ids; None: unknown, kept)."""
    if r["owner"] == -1 and alive is not None:
        return r["run_id"] in alive
    return owner_alive(r["owner"], r.get("owner_start"))


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
    found = tagged_processes()
    procs = [p for p in found if all_runs or orphaned(p)]
    tagged = set()
    for p in found:
        try:
            tagged.add(p.environ().get(RUN_ENV))
        except Exception:  # noqa: BLE001 - gone meanwhile: not alive
            continue
    in_engine = engine_runs()
    alive = None if in_engine is None else tagged | in_engine
    done = reap(procs)
    for d in done:
        print(f"reaped {d}")
    live_tables = {r["nft_table"] for r in registry.runs() if not all_runs and _owner_alive(r, alive)}
    dropped = []
    for t in nft.tables():
        if t not in live_tables:
            try:
                nft.delete_table(t)
                dropped.append(t)
                print(f"deleted nftables table inet {t}")
            except Exception as e:  # noqa: BLE001 - report and go on with the rest
                print(f"could not delete table {t}: {e}")
    engine, problems, unchecked = reap_engine(all_runs)
    if unchecked:
        print(f"docker: {unchecked}")
    for line in engine:
        print(f"removed {line}")
    for line in problems:
        print(f"could not remove: {line}")
    removed = []
    for r in registry.runs():
        if all_runs or not _owner_alive(r, alive):
            for d in remove_folders(r):
                removed.append(d)
                print(f"removed {d}")
            registry.unregister(r["run_id"])
    print(f"pschaos clean: {len(done)} process(es) reaped, {len(dropped)} nftables table(s) deleted, "
          f"{len(engine)} container(s), volume(s) and image(s) removed, {len(removed)} folder(s) removed"
          + (f", {len(problems)} run(s) left on the engine" if problems else ""))
    return 1 if problems else 0
