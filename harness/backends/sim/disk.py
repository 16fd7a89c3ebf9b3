"""The twin's storage: every node's local checkpoint folder and every shard's shared one, in memory.

What psnodes/store/checkpoint.py does on a real disk, in virtual time and with its semantics: a writer
writes the state aside under a temporary name of its own (this takes `fsync_s + bytes / write
rate` virtual seconds: the write is "in progress" and `checkpoint_writes` lists it), then, under
the folder's lock, decides by `pschaos.psnodes.core.checkpoints.keeps_current` whether the manifest
moves (newer_only: only a newer (term, epoch, seq)), writes the manifest aside (one more fsync)
and renames both into place at one instant, dropping state files no manifest names and
temporary files older than STALE_TMP_S. A reader trusts only what the manifest names.

A writer killed mid-write (its SimPy process interrupted) runs no clean-up, as SIGKILL runs
none: its temporary file stays behind (`stray_tmp` in `checkpoint_scan`) and the manifest is
the old one. The blob is the real `ShardStore.export_state` output, so `checkpoint_scan`
checks it with the real `pschaos.psnodes.store.blob.unpack`.

A power cut (`power_loss`, the power-loss fault) leaves what a disk would: each folder keeps the
entries of its last sync (`durable`: psnodes syncs the folder right after its renames) and each
file's data only if it was synced (psnodes syncs each checkpoint file before its rename; it syncs
neither verified.json nor its rename). Temporary files in flight are gone with the cut.

Folder names are pschaos.psnodes.config's relative to the work dir (`data/shard-0-1`,
`checkpoints/shard-0`), which is what the process backend's checkpoint_scan reports as `dir`.
"""
from __future__ import annotations

import itertools
import json
import weakref
import zlib
from dataclasses import dataclass, field, fields
from pathlib import PurePosixPath
from typing import Any, Callable, Mapping

import simpy

from pschaos.psnodes.store.checkpoint import MANIFEST, STALE_TMP_S, damage, parse_manifest, seal
from pschaos.psnodes.core.checkpoints import keeps_current
from pschaos.psnodes.placement import parse_node_name

from pschaos.harness.checkers.scan import scan_entry
from pschaos.harness.backends.sim.clock import SimClock
from pschaos.harness.backends.sim.rpc import Gen


@dataclass(frozen=True)
class DiskCalibration:
    """Timing of a node's disk (calibration keys; other keys of the dict are ignored;
    `checkpoint_mb_s`, calibration.json's name for the write rate, is read when
    `disk_write_mb_s` is absent)."""

    disk_write_mb_s: float = 400.0    # sequential write throughput, MB/s, fsync included
    disk_fsync_s: float = 0.002       # one fsync of a small file or a folder

    @classmethod
    def of(cls, cal: "DiskCalibration | Mapping[str, Any] | None") -> "DiskCalibration":
        if cal is None or isinstance(cal, DiskCalibration):
            return cal or cls()
        kw = {f.name: cal[f.name] for f in fields(cls) if f.name in cal}
        if "disk_write_mb_s" not in kw and "checkpoint_mb_s" in cal:
            kw["disk_write_mb_s"] = cal["checkpoint_mb_s"]
        got = cls(**kw)
        if got.disk_write_mb_s <= 0 or got.disk_fsync_s < 0:
            raise ValueError(f"disk calibration {got}: disk_write_mb_s must be > 0 and disk_fsync_s >= 0")
        return got

    def write_s(self, nbytes: int) -> float:
        return self.disk_fsync_s + nbytes / (self.disk_write_mb_s * 1e6)


def local_dir(name: str) -> str:
    """A node's own checkpoint folder (pschaos.psnodes.config.ClusterConfig.data_dir, relative)."""
    return f"data/{name.replace('/', '-')}"


def shared_dir(shard: int) -> str:
    """A shard's shared checkpoint folder (ClusterConfig.checkpoint_dir, relative)."""
    return f"checkpoints/shard-{shard}"


@dataclass
class Folder:
    """A folder as programs see it (`files`, `tmp`) and as a power cut would leave it (`durable`:
    the entries of its last sync, each with its content if that was synced, else empty)."""
    files: dict[str, bytes] = field(default_factory=dict)
    tmp: dict[str, float] = field(default_factory=dict)     # temporary file -> virtual time it was begun
    lock: simpy.Resource | None = None
    durable: dict[str, bytes] = field(default_factory=dict)
    unsynced: set[str] = field(default_factory=set)          # files whose data was never synced


_BY_ENV: "weakref.WeakKeyDictionary[simpy.Environment, SimDisk]" = weakref.WeakKeyDictionary()


class SimDisk:
    """The storage of one simulated cluster: folders by relative path."""

    def __init__(self, env: simpy.Environment, clock: SimClock | None = None,
                 calibration: "DiskCalibration | Mapping[str, Any] | None" = None) -> None:
        self.env, self.clock = env, clock or SimClock(env)
        self.cal = DiskCalibration.of(calibration)
        self.folders: dict[str, Folder] = {}
        self._names = itertools.count()

    @classmethod
    def of(cls, env: simpy.Environment, clock: SimClock | None = None) -> "SimDisk":
        """The one default disk of `env` (copies made without a disk share it, as the nodes of one
        machine share its work dir)."""
        if env not in _BY_ENV:
            _BY_ENV[env] = cls(env, clock)
        return _BY_ENV[env]

    def folder(self, d: str) -> Folder:
        if d not in self.folders:
            self.folders[d] = Folder(lock=simpy.Resource(self.env, capacity=1))
        return self.folders[d]

    # ------------------------------------------------------------------ files
    def get(self, d: str, name: str) -> bytes | None:
        f = self.folders.get(d)
        return None if f is None else f.files.get(name)

    def put(self, d: str, name: str, data: bytes) -> None:
        """A small file written aside and renamed at once (verified.json): no time, no tmp left, and
        no sync (psnodes syncs neither its data nor the rename: a cache of etcd's answers)."""
        f = self.folder(d)
        f.files[name] = bytes(data)
        f.unsynced.add(name)

    def power_loss(self, d: str) -> dict:
        """What a power cut leaves of the folder: its last sync's entries, each file's data only if
        it was synced; temporary files gone. Returns what was lost (the FUSE disk's record)."""
        f = self.folders.get(d)
        if f is None:
            return {"dropped_files": [], "undone": [], "torn": None, "dropped_bytes": 0}
        lost = sorted(n for n in f.files if f.files[n] != f.durable.get(n)) + sorted(f.tmp)
        gone = sum(len(f.files[n]) for n in f.files if f.files[n] != f.durable.get(n))
        undone = sorted(set(f.files) ^ set(f.durable)) + sorted(f.tmp)
        f.files, f.tmp, f.unsynced = dict(f.durable), {}, set()
        return {"dropped_files": lost, "undone": undone, "torn": None, "dropped_bytes": gone}

    def rot(self, d: str, file: str, choose: Callable[[int], tuple[int, int]]) -> dict:
        """Flip the bit `choose(size)` picks of a file at rest (the manifest's when `file` is ''):
        on the disk and in what programs read alike. Raises LookupError with what is missing."""
        f = self.folders.get(d)
        man = self.manifest(d)
        file = file or (man or {}).get("file", "")
        if f is None or not file or not f.files.get(file):
            raise LookupError(f"{d}/{file or MANIFEST}: no such file, or empty")
        if file in f.unsynced or f.durable.get(file) != f.files[file]:
            raise LookupError(f"{d}/{file}: its data is not at rest yet (never synced)")
        data = bytearray(f.files[file])
        offset, bit = choose(len(data))
        before = data[offset]
        data[offset] ^= 1 << bit
        f.files[file] = f.durable[file] = bytes(data)
        return {"file": file, "offset": offset, "bit": bit, "before": before, "after": data[offset], "bytes": len(data)}

    def _sync_folder(self, f: Folder) -> None:
        """psnodes' fsync of the folder after its renames: its entries reach the disk, each with
        its content if that was synced (an unsynced file's bytes never do)."""
        f.durable = {n: (b"" if n in f.unsynced else data) for n, data in f.files.items()}

    def manifest(self, d: str) -> dict | None:
        """The folder's manifest if it is one, whole and sealed (psnodes' parse_manifest)."""
        return parse_manifest(self.get(d, MANIFEST))[0]

    def read(self, d: str, on_damage: Callable[[str], None] | None = None) -> tuple[dict, bytes] | None:
        """pschaos.psnodes.store.checkpoint.read_checkpoint: what the manifest names, whole and
        unchanged, or None; `on_damage` hears why a checkpoint that is there is not taken."""
        man, why = parse_manifest(self.get(d, MANIFEST))
        blob = self.get(d, man.get("file", "")) if man else None
        if man is None:
            pass
        elif blob is None:
            why = f"{MANIFEST} names {man.get('file')}, which is not there"
        else:
            why = damage(man, blob)
        if why and on_damage is not None:
            on_damage(why)
        return None if why or man is None or blob is None else (man, blob)

    def wipe(self, d: str) -> None:
        """rm -r of the folder (a lost disk); a writer still busy in it fails at its rename."""
        self.folders.pop(d, None)

    # ------------------------------------------------------------------ the write
    def write(self, d: str, blob: bytes, seq: int, epoch: int, node: str, term: int | None = None,
              newer_only: bool = True, writer: str = "") -> Gen:
        """`man, wrote = yield from disk.write(...)`: pschaos.psnodes.store.checkpoint.write_checkpoint. Raises
        OSError when the folder was wiped under the writer (its temporary file is gone)."""
        term = epoch if term is None else term
        name = f"state-t{term}-{seq:012d}-e{epoch}-{node.replace('/', '-')}.psb"
        manifest = {"seq": seq, "epoch": epoch, "term": term, "file": name, "bytes": len(blob), "node": node,
                    "crc32": zlib.crc32(blob)}
        tag = f"{writer or node.replace('/', '-')}-{next(self._names)}"
        state_tmp = f"{name}.{tag}.tmp"
        self.folder(d).tmp[state_tmp] = self.env.now
        yield self.env.timeout(self.cal.write_s(len(blob)))      # the slow part, outside the lock
        f = self._still(d, state_tmp)
        with f.lock.request() as got:
            yield got
            cur = self.manifest(d)
            if keeps_current(cur, manifest, newer_only, cur is not None and cur.get("file", "") in f.files):
                f.tmp.pop(state_tmp, None)
                return cur, False
            manifest["time"] = self.clock.now()      # under the lock: manifests in write order
            man_tmp = f"{MANIFEST}.{tag}.tmp"
            f.tmp[man_tmp] = self.env.now
            yield self.env.timeout(self.cal.write_s(0))
            f = self._still(d, state_tmp)
            del f.tmp[state_tmp], f.tmp[man_tmp]
            f.files[name] = blob
            manifest = seal(manifest)
            f.files[MANIFEST] = json.dumps(manifest).encode()
            synced = True                # psnodes' _write_aside fsyncs each file before its rename
            (f.unsynced.difference_update if synced else f.unsynced.update)({name, MANIFEST})
            self._sync_folder(f)         # psnodes: _fsync_dir(directory) after the renames
            self._sweep(f, keep=name)    # its unlinks reach the disk with the folder's next sync
            return manifest, True

    def _still(self, d: str, tmp: str) -> Folder:
        f = self.folders.get(d)
        if f is None or tmp not in f.tmp:
            raise FileNotFoundError(f"[Errno 2] No such file or directory: '{d}/{tmp}'")
        return f

    def _sweep(self, f: Folder, keep: str) -> None:
        for n in [n for n in f.files if n.startswith("state-") and n.endswith(".psb") and n != keep]:
            del f.files[n]
        for n in [n for n, t in f.tmp.items() if self.env.now - t > STALE_TMP_S]:
            del f.tmp[n]

    # ------------------------------------------------------------------ what the harness reads
    def checkpoint_writes(self, name: str) -> list[str]:
        """The temporary files in the node's folder and its shard's shared one (none for a worker
        or etcd), as the process backend lists `*.tmp`: a kill while one is listed landed mid-write."""
        if not name.startswith("shard-"):
            return []
        shard, _ = parse_node_name(name)
        dirs = [local_dir(name), shared_dir(shard)]
        return [f"{d}/{t}" for d in dirs if d in self.folders for t in sorted(self.folders[d].tmp)]

    def checkpoint_scan(self) -> list[dict]:
        """harness/backends/process/backend.py's checkpoint_scan: every folder with a manifest."""
        out = []
        for d in sorted((d for d, f in self.folders.items() if MANIFEST in f.files),
                        key=lambda d: PurePosixPath(d, MANIFEST).parts):
            f = self.folders[d]
            out.append(scan_entry(d, sorted(f.tmp), f.files[MANIFEST], lambda name, f=f, d=d: _read(f, d, name)))
        return out

    scan = checkpoint_scan


def _read(f: "Folder", d: str, name: str) -> bytes:
    if name not in f.files:
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{d}/{name}'")
    return f.files[name]


__all__ = ["DiskCalibration", "Folder", "SimDisk", "local_dir", "shared_dir"]
