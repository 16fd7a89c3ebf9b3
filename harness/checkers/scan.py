"""A checkpoint folder turned into a `checkpoint-scan` event: the evidence `checkpoints-atomic`
judges. The process backend, the twin's disk and the disk-full fault all record it through this
one function, so the same folder cannot be judged two ways."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pschaos.psnodes.store.blob import unpack
from pschaos.psnodes.store.checkpoint import parse_manifest


def scan_entry(d: str, stray_tmp: list[str], manifest: bytes | str, read: Callable[[str], bytes]) -> dict:
    """One `checkpoint-scan` value: is the manifest whole (its seal) and does it name a whole,
    loadable file? `read(name)`
    returns a file of the folder (raising what a missing file raises)."""
    v: dict[str, Any] = {"dir": d, "stray_tmp": stray_tmp}
    try:
        m, broken = parse_manifest(manifest)
        if m is None:
            raise ValueError(broken)
        blob = read(m["file"])
        v.update(seq=m["seq"], file=m["file"], size_ok=len(blob) == m["bytes"])
        unpack(blob)
        v["loadable"] = True
    except Exception as e:  # noqa: BLE001 - what is wrong is the finding
        v.update(loadable=False, error=f"{e.__class__.__name__}: {e}")
    return v


def scan_folder(d: str, folder: Path, attempts: int = 5) -> dict:
    """`scan_entry` of a real folder that a live copy may still write. Lock-free, as psnodes'
    own reader: a writer may replace the manifest and remove the file it named between our two
    reads, which tears nothing. So an unloadable reading whose manifest has changed since is
    taken again (up to `attempts` times); one whose manifest stands is the finding."""
    from pschaos.psnodes.store.checkpoint import MANIFEST

    man = folder / MANIFEST
    for _ in range(attempts):
        text = man.read_bytes()           # bytes: a rotted manifest need not be UTF-8 any more
        v = scan_entry(d, sorted(p.name for p in folder.glob("*.tmp")), text, lambda name: (folder / name).read_bytes())
        if v.get("loadable") or man.read_bytes() == text:
            return v
    return v
