"""Torn writes and the cut at a sync: what lands of a write caught by the power, and a trap that
cuts the power the moment a program asks the disk to sync a named file.

A power cut timed from outside (a kill, then the cut) can only land between two calls of the
program; the sync of one file is a moment a program cannot see coming from inside either, and
it is where a torn write matters: the bytes of a manifest are in flight, its rename is not yet
made. `SyncTrap` is armed on the disk (serve.py's `arm`), fires in the disk's own fsync, under
its lock: the cut is taken at once, tearing that file's last write when asked, and the disk stays
off (every call fails with EIO) until it is powered on again once the program is dead.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pschaos.diskfaults.records import Key

Disk = Any        # diskfaults/disk.py's Disk, which calls these (named so, not imported: no circle)

PAGE = 4096
KEEPS = ("pages", "prefix")


def keep_for(size: int, keep: str, r: float) -> int | None:
    """How many bytes of a `size`-byte write land, from a draw `r` in [0, 1): `pages` a whole
    number of 4 KiB pages (a write of a page or less: a prefix), `prefix` any number; always at
    least one and fewer than all. None when `size` is too small to tear (one byte or none)."""
    if keep not in KEEPS:
        raise ValueError(f"keep={keep!r}: pages or prefix")
    r = min(max(float(r), 0.0), 1.0 - 1e-12)
    if keep == "pages" and size > PAGE:
        return PAGE * (1 + int(r * ((size - 1) // PAGE)))
    if size > 1:
        return 1 + int(r * (size - 1))
    return None


@dataclass
class SyncTrap:
    """Cut the power as a program asks to sync a file whose name starts with `name` (any folder
    of the disk); tear that file's last held write when `keep` is given (`r`: the seed's draw).
    `fired` is what the cut took, once it did: the trap fires once."""

    name: str
    keep: str | None = None
    r: float = 0.0
    fired: dict | None = None

    def matches(self, rel: str) -> bool:
        return self.fired is None and Path(rel).name.startswith(self.name)

    def as_dict(self) -> dict:
        return {"name": self.name, "keep": self.keep, "fired": self.fired}


def tearing(disk: Disk, rel: str, keep: int) -> tuple:
    """(path, key, offset, the part that lands, the write's size) of the last held write of
    `rel`, or (path, None, why) when it holds none."""
    try:
        key = disk._key(rel)
    except OSError:
        return rel, None, "no such file"
    h = disk.held.get(key)
    if h is None or h.last is None:
        return rel, None, "no write held for it (synced, or never written)"
    offset, data = h.last
    return rel, key, offset, data[:max(0, min(keep, len(data)))], len(data)


def tear_lands(disk: Disk, rel: str, key: Key | None, *rest) -> dict:
    """Land the torn part on the disk, if the cut kept the file (its name survived the undo)."""
    if key is None:
        return {"path": rel, "torn": False, "why": rest[0]}
    offset, part, size = rest
    name = disk._names().get(key)
    p = disk.path(name) if name and "(put aside)" not in name else None
    if p is None:
        return {"path": rel, "torn": False, "removed": True, "write_bytes": size, "kept_bytes": len(part),
                "why": "the cut removed the file: its entry never reached the disk"}
    with open(p, "r+b") as f:
        f.seek(offset)
        f.write(part)
        f.flush()
        os.fsync(f.fileno())
    return {"path": str(p.relative_to(disk.root)), "torn": True, "offset": offset, "write_bytes": size,
            "kept_bytes": len(part)}


def trip(disk: Disk, trap: SyncTrap, key: Key, rel: str) -> dict:
    """The cut `trap` makes as `rel` is synced (the disk's lock held): its last held write torn
    when the trap says so, everything else unsynced dropped or undone, as any power loss."""
    h = disk.held.get(key)
    size = len(h.last[1]) if h is not None and h.last is not None else 0
    torn, why = None, None
    if trap.keep:
        n = keep_for(size, trap.keep, trap.r)
        if n is None:
            why = f"its last held write is {size} byte(s): nothing to tear"
        else:
            torn = {"path": rel, "keep_bytes": n}
    loss = disk.power_loss(torn).as_dict()
    if why:
        loss["torn"] = {"path": rel, "torn": False, "why": why}
    return {"path": rel.lstrip("/"), "held_bytes": size, **loss}
