"""Observation code both backends share: a checkpoint judged from its manifest, and the routing
table read from the live copies while the control plane is down. One place, so the process and
the simulated backend cannot judge the same evidence two ways."""
from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from psnodes.blob import unpack
from psnodes.config import ShardRecord


def scan_entry(d: str, stray_tmp: list[str], manifest: bytes | str, read: Callable[[str], bytes]) -> dict:
    """One `checkpoint-scan` value: does the manifest name a whole, loadable file? `read(name)`
    returns a file of the folder (raising what a missing file raises)."""
    v: dict[str, Any] = {"dir": d, "stray_tmp": stray_tmp}
    try:
        m = json.loads(manifest)
        blob = read(m["file"])
        v.update(seq=m["seq"], file=m["file"], size_ok=len(blob) == m["bytes"])
        unpack(blob)
        v["loadable"] = True
    except Exception as e:  # noqa: BLE001 - what is wrong is the finding
        v.update(loadable=False, error=f"{e.__class__.__name__}: {e}")
    return v


def routes_from_copies(nodes: Iterable[str], alive: Callable[[str], bool],
                       status: Callable[[str], Any]) -> dict[int, ShardRecord]:
    """The routing table as the live copies report it: per shard, the primary at the highest epoch."""
    out: dict[int, ShardRecord] = {}
    for n in nodes:
        st = status(n) if alive(n) else None
        if st is not None and st.role == "primary":
            cur = out.get(st.shard)
            if cur is None or st.epoch > cur.epoch:
                out[st.shard] = ShardRecord(st.epoch, n, list(st.isr))
    return out
