"""Atomic checkpoints: write aside, fsync, rename; the manifest is written last.

A reader trusts only what the manifest names, so a crash at any point leaves either the old
checkpoint or the new one, never a torn file.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

MANIFEST = "manifest.json"


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(directory: Path, blob: bytes, seq: int, epoch: int, node: str) -> dict:
    """Write `blob` as the checkpoint at `seq`; returns the manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    name = f"state-{seq:012d}-e{epoch}.psb"
    _write_atomic(directory / name, blob)
    manifest = {"seq": seq, "epoch": epoch, "file": name, "bytes": len(blob), "node": node,
                "time": time.time()}
    _write_atomic(directory / MANIFEST, json.dumps(manifest).encode())
    _fsync_dir(directory)
    for old in directory.glob("state-*.psb"):
        if old.name != name:
            old.unlink(missing_ok=True)
    return manifest


def read_checkpoint(directory: Path) -> tuple[dict, bytes] | None:
    """The checkpoint the manifest names, or None when there is none (or it is incomplete)."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
        blob = (directory / manifest["file"]).read_bytes()
    except (OSError, ValueError, KeyError):
        return None
    if len(blob) != manifest.get("bytes"):
        return None
    return manifest, blob
