"""Each shard copy's data folder behind a power-loss disk (pschaos.diskfaults), for a run whose
scenario schedules a storage fault: the copy writes through it as through any folder, and a power
cut leaves what a disk would hold (what it synced).

The disks are mounted as their copies first start (a scale-out's groups too) and stay mounted
across the copies' restarts: the disk outlives the node, as a machine's does. Their serving
processes carry the run's tag, so the run's teardown and `pschaos clean` find them.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

from pschaos.diskfaults.mounts import DiskError, DiskMount

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.procs import run_env

class NodeDisks:
    """The power-loss disks of one run's shard copies, by copy name."""

    def __init__(self, stores: Path, run_id: str, owner: int | None) -> None:
        self.stores, self.run_id, self.owner = stores, run_id, owner
        self.mounts: dict[str, DiskMount] = {}
        self.lock = threading.Lock()
        self.closed = False

    def ensure(self, name: str, data_dir: Path) -> None:
        """The copy's data folder behind its disk (mounted once, before the copy's first start);
        known before it starts, so a stop meanwhile (Ctrl-C) takes it down too."""
        store = self.stores / name.replace("/", "-")     # outside the work folder: no scan reads a disk's inside
        with self.lock:
            if name in self.mounts:
                return
            if self.closed:
                raise HarnessError(f"{name}: the run is being torn down; no disk is mounted any more")
            m = self.mounts[name] = DiskMount(store, data_dir, env=run_env(self.run_id, self.owner))
        try:
            m.start()
        except BaseException as e:
            with self.lock:
                self.mounts.pop(name, None)     # not a disk: the next start tries again, no copy runs bare
            if isinstance(e, DiskError):
                raise HarnessError(f"{name}: {e}") from None
            raise

    def _disk(self, name: str, kind: str) -> DiskMount:
        if name not in self.mounts:
            raise HarnessError(f"{kind} {name}: its data folder has no power-loss disk (only shard copies have "
                               f"one); target a shard copy, e.g. primary(shard=0)")
        m = self.mounts[name]
        if not m.serving():
            code = m.proc.returncode if m.proc is not None else None
            raise HarnessError(f"{kind} {name}: its power-loss disk's process died (exit {code}; "
                               f"{m.store / 'serve.log'}): the copy's files were not on the disk modelled")
        return m

    def power_loss(self, name: str, torn: dict | None = None) -> dict:
        """What the disk kept and lost when its power went (the copy must be dead already)."""
        try:
            return self._disk(name, "power-loss").power_loss(torn)
        except (DiskError, OSError) as e:
            raise HarnessError(f"power-loss {name}: the disk did not answer: {e}") from None

    def order(self, copy: str, kind: str, op: str, /, **fields) -> dict:
        """A sync trap's control request (arm, disarm, power-on) to the copy's disk."""
        try:
            return self._disk(copy, kind).order(op, **fields)
        except (DiskError, OSError) as e:
            raise HarnessError(f"{kind} {copy}: the disk did not answer {op}: {e}") from None

    def held(self, name: str) -> dict:
        """The writes the disk holds now: {path: bytes of its last write}."""
        return dict(self.held_status(name).get("held_writes") or {})

    def held_status(self, name: str) -> dict:
        """The disk's status (serve.py): what it holds, its trap, whether its power is off."""
        try:
            return self._disk(name, "torn-write").status()
        except (DiskError, OSError) as e:
            raise HarnessError(f"torn-write {name}: the disk did not answer: {e}") from None

    def stop(self) -> None:
        """Unmount every disk; the first failure raised once all were tried. A disk whose process
        died before the end is one too: the run's file calls did not meet the disk it modelled."""
        with self.lock:
            self.closed = True
            mounts = list(self.mounts.items())
        errors = [f"{n}: its power-loss disk's process died during the run (exit {m.proc.returncode}; "
                  f"{m.store / 'serve.log'})" for n, m in mounts if m.proc is not None and m.proc.poll() is not None]
        for _, m in mounts:
            try:
                m.stop()
            except Exception as e:  # noqa: BLE001 - every disk is tried; the first failure is raised
                errors.append(str(e))
        if errors:
            raise HarnessError(errors[0])


class DiskFaults:
    """The process backend's storage faults (harness/faults/storage.py), over its `disks` (None
    when the run mounted none) and its copies' data folders."""

    disks: NodeDisks | None
    alive: Callable[[str], bool]
    data_path: Callable[[str], Path]

    def power_loss(self, name: str, torn: dict | None = None) -> dict:
        """Cut the power of a dead copy's disk: what it never synced is gone."""
        if self.disks is None:
            raise HarnessError(f"power-loss {name}: this run mounted no power-loss disks (a scenario with a "
                               "power-loss or torn-write fault gets them)")
        if self.alive(name):          # a copy started again meanwhile (another fault's heal) keeps writing
            raise HarnessError(f"power-loss {name}: the copy runs again; its disk's power goes only while it is down")
        return self.disks.power_loss(name, torn)

    def arm_sync_cut(self, name: str, kind: str, file: str, keep: str | None, r: float) -> None:
        """Cut `name`'s power the moment it asks its disk to sync a file whose name starts with
        `file` (the disk kills the copy first, then cuts; diskfaults/tear.py), tearing that
        file's last write when `keep` is given."""
        if self.disks is None:
            raise HarnessError(f"{kind} {name}: this run mounted no power-loss disks")
        self.disks.order(name, kind, "arm", name=file, keep=keep, r=r)

    def sync_cut_fired(self, name: str) -> bool:
        trap = self.disks.order(name, "power-loss", "trap").get("trap") if self.disks is not None else None
        return bool(trap and trap.get("fired"))

    def disk_off(self, name: str) -> bool:
        """Whether the copy's disk is off (a sync trap fired and nothing powered it on yet)."""
        return bool(self.disks.order(name, "power-loss", "trap").get("off")) if self.disks is not None else False

    def disarm_sync_cut(self, name: str, kind: str) -> dict | None:
        """No more trap; what its cut took if it fired (the disk stays off until `power_on`)."""
        return self.disks.order(name, kind, "disarm").get("fired") if self.disks is not None else None

    def power_on(self, name: str, kind: str) -> None:
        """The copy is dead: its disk serves calls again (before its restart)."""
        if self.alive(name):
            raise HarnessError(f"{kind} {name}: the copy runs; its disk is powered on only once it is dead")
        if self.disks is not None:
            self.disks.order(name, kind, "power-on")

    def held_writes(self, name: str) -> dict:
        if self.disks is None:
            raise HarnessError(f"torn-write {name}: this run mounted no power-loss disks")
        return self.disks.held(name)

    def rot(self, name: str, file: str, choose: Callable[[int], tuple[int, int]]) -> dict:
        """Flip one bit of a dead copy's file at rest (`file` in its data folder; '' the state file
        its manifest names), on the disk itself: behind a power-loss disk, in its backing folder,
        so no cache of the disk's holds the old byte."""
        if self.alive(name):
            raise HarnessError(f"bit-rot {name}: the copy runs again; a file rots at rest only while it is down")
        mount = self.disks._disk(name, "bit-rot") if self.disks is not None and name in self.disks.mounts else None
        folder = mount.store / "disk" if mount is not None else self.data_path(name)
        if mount is not None:
            held = self.disks.held(name)
            target = file or _manifest_file(folder, name)
            if target in held:         # the disk's cache would serve (and later sync) the old bytes
                raise HarnessError(f"bit-rot {name}: {target} has writes the disk holds, not yet at rest; rot a "
                                   "synced file")
        got = flip_at_rest(folder, file, choose, name)
        seen = (self.data_path(name) / got["file"]).read_bytes()[got["offset"]]     # as the copy will read it
        if seen != got["after"]:
            raise HarnessError(f"bit-rot {name}: {got['file']} still reads {seen:#04x} at byte {got['offset']} "
                               "through the copy's folder: the rot would not reach it")
        return got


def _manifest_file(folder: Path, name: str) -> str:
    """The state file the folder's manifest names (what a bit-rot rots by default)."""
    from pschaos.psnodes.store.checkpoint import MANIFEST, parse_manifest

    try:
        man, broken = parse_manifest((folder / MANIFEST).read_bytes())
        if man is None:
            raise ValueError(broken or "there is none")
        return str(man["file"])
    except (OSError, ValueError, KeyError) as e:
        raise HarnessError(f"bit-rot {name}: no checkpoint to rot: its manifest does not name a file whole ({e}); "
                           "rot it later (at a later step), or name params.file") from None


def flip_at_rest(folder: Path, file: str, choose: Callable[[int], tuple[int, int]], name: str) -> dict:
    """Flip the bit `choose(size)` picks of `folder/file` (the manifest's file when '') and sync it."""
    file = file or _manifest_file(folder, name)
    path = folder / file
    if not path.resolve().is_relative_to(folder.resolve()):
        raise HarnessError(f"bit-rot {name}: {file} is outside the copy's data folder")
    try:
        data = bytearray(path.read_bytes())
    except OSError as e:
        raise HarnessError(f"bit-rot {name}: {file} cannot be read at rest: {e}") from None
    if not data:
        raise HarnessError(f"bit-rot {name}: {file} is empty: no byte to flip")
    offset, bit = choose(len(data))
    before = data[offset]
    data[offset] ^= 1 << bit
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes([data[offset]]))
        f.flush()
        os.fsync(f.fileno())
    got = path.read_bytes()[offset]
    if got == before:
        raise HarnessError(f"bit-rot {name}: {file} byte {offset} still reads {before:#04x} after the flip")
    return {"file": file, "offset": offset, "bit": bit, "before": before, "after": got, "bytes": len(data)}
