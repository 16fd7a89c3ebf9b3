"""Each shard copy's data folder behind a power-loss disk (pschaos.diskfaults), for a run whose
scenario schedules a storage fault: the copy writes through it as through any folder, and a power
cut leaves what a disk would hold (what it synced).

The disks are mounted as their copies first start (a scale-out's groups too) and stay mounted
across the copies' restarts: the disk outlives the node, as a machine's does. Their serving
processes carry the run's tag, so the run's teardown and `pschaos clean` find them.
"""
from __future__ import annotations

from pathlib import Path

from pschaos.diskfaults.mounts import DiskError, DiskMount

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.procs import run_env

class NodeDisks:
    """The power-loss disks of one run's shard copies, by copy name."""

    def __init__(self, stores: Path, run_id: str, owner: int | None) -> None:
        self.stores, self.run_id, self.owner = stores, run_id, owner
        self.mounts: dict[str, DiskMount] = {}

    def ensure(self, name: str, data_dir: Path) -> None:
        """The copy's data folder behind its disk (mounted once, before the copy's first start)."""
        if name in self.mounts:
            return
        store = self.stores / name.replace("/", "-")     # outside the work folder: no scan reads a disk's inside
        try:
            self.mounts[name] = DiskMount(store, data_dir, env=run_env(self.run_id, self.owner)).start()
        except DiskError as e:
            raise HarnessError(f"{name}: {e}") from None

    def _disk(self, name: str, kind: str) -> DiskMount:
        if name not in self.mounts:
            raise HarnessError(f"{kind} {name}: its data folder has no power-loss disk (only shard copies have "
                               f"one); target a shard copy, e.g. primary(shard=0)")
        return self.mounts[name]

    def power_loss(self, name: str, torn: dict | None = None) -> dict:
        """What the disk kept and lost when its power went (the copy must be dead already)."""
        try:
            return self._disk(name, "power-loss").power_loss(torn)
        except (DiskError, OSError) as e:
            raise HarnessError(f"power-loss {name}: the disk did not answer: {e}") from None

    def held(self, name: str) -> dict:
        """The writes the disk holds now: {path: bytes of its last write}."""
        try:
            return dict(self._disk(name, "torn-write").status().get("held_writes") or {})
        except (DiskError, OSError) as e:
            raise HarnessError(f"torn-write {name}: the disk did not answer: {e}") from None

    def stop(self) -> None:
        """Unmount every disk; the first failure raised once all were tried."""
        errors = []
        for m in self.mounts.values():
            try:
                m.stop()
            except DiskError as e:
                errors.append(e)
        self.mounts.clear()
        if errors:
            raise HarnessError(str(errors[0]))
