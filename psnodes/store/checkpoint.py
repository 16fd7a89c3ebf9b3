"""Atomic checkpoints: write aside, fsync, rename; the manifest is written last, sealed.

A reader trusts only what the manifest names, so a crash at any point leaves either the old
checkpoint or the new one, never a torn file. The manifest carries its own CRC-32 (`seal`) and
the state file's: a manifest or a state file torn or changed at rest is refused, never loaded.

Several writers may share a folder: the shard's shared checkpoint is written by its primary, and
a deposed primary that does not know it yet, its periodic writer and a Snapshot call can all
write at once. So every writer writes under temporary names of its own (pid, thread, counter),
and the replace of the manifest and the removal of old files happen under an exclusive lock on
the folder (flock; the kernel drops it if the writer dies). With `newer_only`, the manifest is
replaced only by a newer checkpoint: higher (term, epoch, seq), where term is the epoch its
writer served in and epoch that of its last entry. A file is removed only when no manifest names
it, so a manifest never names a missing file.
"""
from __future__ import annotations

import fcntl
import itertools
import json
import os
import threading
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Mapping

from pschaos.psnodes.core.checkpoints import keeps_current

MANIFEST = "manifest.json"
SEAL = "seal"             # the manifest's own CRC-32 (seal())
LOCK = ".lock"
STALE_TMP_S = 60.0        # a temporary file this old belongs to a writer that died mid-write

_names = itertools.count()
_durable: set[Path] = set()       # folders whose entries this process made durable (_make_dirs)


def _tmp(path: Path) -> Path:
    return path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}-{next(_names)}.tmp")


def _write_aside(path: Path, data: bytes) -> Path:
    """`data` in a new temporary file beside `path`, flushed to disk; returns the temporary path."""
    tmp = _tmp(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs(directory: Path) -> None:
    """`directory` and the folders above it that are missing, each made durable in its parent: a
    file synced in a folder whose own entry never reached the disk is lost with it at a power cut
    (tests/integration/test_power_loss_disk.py saw a node's first checkpoints vanish so). A folder
    another writer made may not be synced yet: its parent is synced once by this process too."""
    if directory in _durable:
        return
    missing = []
    d = directory
    while not d.is_dir():
        missing.append(d)
        d = d.parent
    for m in reversed(missing):
        try:
            m.mkdir()
        except FileExistsError:
            pass
        _fsync_dir(m.parent)
    if not missing:
        _fsync_dir(directory.parent)
    _durable.add(directory)


@contextmanager
def _locked(d: Path) -> Iterator[None]:
    fd = os.open(d / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def seal(manifest: Mapping) -> dict:
    """`manifest` with its own CRC-32 (`seal`, over its other fields as canonical JSON): a
    manifest torn in flight or changed at rest can then be told from a whole one, even when its
    bytes still parse (a new manifest's prefix over an old one's tail parses, and names the old
    file under the new position)."""
    body = {k: v for k, v in manifest.items() if k != SEAL}
    return {**body, SEAL: zlib.crc32(json.dumps(body, sort_keys=True).encode())}


def parse_manifest(raw: bytes | str | None) -> tuple[dict | None, str]:
    """(the manifest, '') when `raw` is one, whole and sealed; (None, why) when it is not: it does
    not parse, or its seal is missing or is not its fields' CRC-32. (None, '') when there is none."""
    if raw is None:
        return None, ""
    try:
        man = json.loads(raw)
    except ValueError:
        return None, f"{MANIFEST}: does not parse (torn or empty)"
    if not isinstance(man, dict) or SEAL not in man:
        return None, f"{MANIFEST}: carries no {SEAL} (torn, or not written by this psnodes)"
    want = seal(man)[SEAL]
    if man[SEAL] != want:
        return None, f"{MANIFEST}: its fields' CRC-32 {want:08x} is not its seal {int(man[SEAL]) & 0xffffffff:08x} " \
                     "(torn, or changed at rest)"
    return man, ""


def _read_manifest(directory: Path) -> tuple[dict | None, str]:
    try:
        raw = (directory / MANIFEST).read_bytes()
    except OSError:
        raw = None
    return parse_manifest(raw)


def _current(directory: Path) -> dict | None:
    """The folder's manifest, or None: none, or one that is not whole (a writer replaces it)."""
    return _read_manifest(directory)[0]


def write_checkpoint(directory: Path, blob: bytes, seq: int, epoch: int, node: str, term: int | None = None,
                     newer_only: bool = True) -> tuple[dict, bool]:
    """Write `blob` (the state at `seq`, whose last entry is of `epoch`, written by `node` serving in
    `term`) as the folder's checkpoint. Returns the manifest in force afterwards and whether it is
    ours: with `newer_only`, a checkpoint not newer than the folder's (pschaos.psnodes.core.checkpoints.order)
    is dropped."""
    _make_dirs(directory)
    term = epoch if term is None else term
    name = f"state-t{term}-{seq:012d}-e{epoch}-{node.replace('/', '-')}.psb"
    manifest = {"seq": seq, "epoch": epoch, "term": term, "file": name, "bytes": len(blob), "node": node,
                "crc32": zlib.crc32(blob)}
    state_tmp = _write_aside(directory / name, blob)     # the slow part, outside the lock
    man_tmp: Path | None = None
    try:
        with _locked(directory):
            cur = _current(directory)
            if keeps_current(cur, manifest, newer_only,
                             cur is not None and (directory / cur.get("file", "")).is_file()):
                return cur, False
            manifest["time"] = time.time()       # under the lock: manifests of a folder in write order
            manifest = seal(manifest)
            man_tmp = _write_aside(directory / MANIFEST, json.dumps(manifest).encode())
            os.replace(state_tmp, directory / name)
            os.replace(man_tmp, directory / MANIFEST)
            _fsync_dir(directory)
            _sweep(directory, keep=name)
            return manifest, True
    finally:
        state_tmp.unlink(missing_ok=True)
        if man_tmp is not None:
            man_tmp.unlink(missing_ok=True)


def _sweep(directory: Path, keep: str) -> None:
    """Under the lock: drop state files the manifest does not name, and temporary files of dead
    writers (a live writer's are young; it renames or removes them itself)."""
    now = time.time()
    for old in directory.glob("state-*.psb"):
        if old.name != keep:
            old.unlink(missing_ok=True)
    for tmp in directory.glob("*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_TMP_S:
                tmp.unlink(missing_ok=True)
        except OSError:
            pass


def damage(manifest: Mapping, blob: bytes) -> str:
    """Why `blob` is not the whole, unchanged file `manifest` names ('' when it is): short or
    long (a torn or incomplete write), or bytes whose CRC-32 is not the manifest's (bit rot)."""
    if len(blob) != manifest.get("bytes"):
        return f"{manifest.get('file')}: {len(blob)} bytes, the manifest says {manifest.get('bytes')} (incomplete)"
    if manifest.get("crc32") is not None and zlib.crc32(blob) != manifest["crc32"]:
        return (f"{manifest.get('file')}: its bytes' CRC-32 {zlib.crc32(blob):08x} is not the manifest's "
                f"{int(manifest['crc32']):08x} (changed at rest)")
    return ""


def read_checkpoint(directory: Path, on_damage: Callable[[str], None] | None = None) -> tuple[dict, bytes] | None:
    """The checkpoint the manifest names, whole and unchanged, or None. A manifest that does not
    parse or whose seal fails, or that names a file that is incomplete or whose bytes fail its
    CRC-32, is no checkpoint:
    `on_damage` hears why (a node says so in its event log and starts without it).

    Lock-free: a writer may replace the manifest and remove the file it named between our two
    reads; then the manifest changed, and we read again."""
    for _ in range(5):
        manifest, broken = _read_manifest(directory)
        if manifest is None:
            if broken and _read_manifest(directory)[1] != broken:
                continue                 # replaced between two reads: read again
            if broken and on_damage is not None:
                on_damage(broken)
            return None
        try:
            blob = (directory / manifest["file"]).read_bytes()
        except (OSError, KeyError):
            if _current(directory) != manifest:
                continue
            if on_damage is not None:
                on_damage(f"{MANIFEST} names {manifest.get('file')}, which is not there")
            return None
        why = damage(manifest, blob)
        if why and _current(directory) != manifest:
            continue
        if why and on_damage is not None:
            on_damage(why)
        return None if why else (manifest, blob)
    return None


def published(shard: int, manifest: Mapping) -> dict:
    """The `checkpoint` / `checkpoint-local` event of a manifest just put in force: what a later
    load of it must match (harness/checkers/loads.py)."""
    return {"shard": shard, **{k: manifest.get(k) for k in ("seq", "epoch", "term", "file", "bytes", "crc32")},
            "written": manifest.get("time")}


def loaded(manifest: Mapping, blob: bytes) -> dict:
    """What a load took: the manifest's file and position, the checksum it promised, and the
    checksum of the bytes actually read (a load of anything but the file the manifest names
    whole shows as a mismatch), and the manifest's seal beside its fields' CRC-32 as read (a
    load from a torn or rotted manifest shows as a mismatch there)."""
    return {**{k: manifest.get(k) for k in ("file", "seq", "epoch", "term", "bytes")},
            "manifest_crc32": manifest.get("crc32"), "crc32": zlib.crc32(blob), "read_bytes": len(blob),
            "seal": manifest.get(SEAL), "fields_crc32": seal(manifest)[SEAL]}
