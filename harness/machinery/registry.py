"""A record of live runs on this machine, so `pschaos clean` knows what a dead run left.

Each run writes one small file naming its owner pid and its nftables table; teardown removes
it. Processes carry the same run id in their environment (see procs.py).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from pschaos.harness.errors import HarnessError

DIR = Path(os.environ.get("PSCHAOS_RUNS_DIR", Path(tempfile.gettempdir()) / "pschaos-runs"))
RUN_MARKER = ".pschaos-run"      # in every run folder the runner makes: a reused --out deletes only those


def made_by_a_run(folder: Path) -> bool:
    """A run folder (`--out`/run) a pschaos run made: its marker, or (before markers) its events/
    folder. Only such a folder is ever deleted to reuse an --out: never someone's own /run."""
    return (folder / RUN_MARKER).is_file() or (folder / "events").is_dir()


def fresh_out(out: Path, run_id: str, stale: tuple[str, ...]) -> None:
    """A reused --out starts clean: its `stale` files go, and a run folder only if a run made it
    (RUN_MARKER); then the new run folder, marked."""
    out.mkdir(parents=True, exist_ok=True)
    for name in stale:
        p = out / name
        if p.is_dir():
            if not made_by_a_run(p):
                raise HarnessError(f"--out {out}: {p} exists and no pschaos run made it (no {RUN_MARKER} "
                                   "in it); choose another --out, or remove that folder yourself")
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    (out / "run").mkdir(parents=True, exist_ok=True)
    (out / "run" / RUN_MARKER).write_text(run_id + "\n")


def register(run_id: str, owner: int, nft_table: str, owner_start: float | None = None,
             folders: list[str] | None = None) -> None:
    """`owner_start` (the owner's start time) tells the owner from a later process given its pid;
    `folders`: what the run made outside its --out (a socket folder under /tmp), for `clean`."""
    DIR.mkdir(parents=True, exist_ok=True)
    (DIR / f"{run_id}.json").write_text(json.dumps({"run_id": run_id, "owner": owner, "nft_table": nft_table,
                                                    "owner_start": owner_start, "folders": folders or [],
                                                    "registered": time.time()}))


def unregister(run_id: str) -> None:
    (DIR / f"{run_id}.json").unlink(missing_ok=True)


def runs() -> list[dict]:
    out = []
    for p in DIR.glob("*.json") if DIR.exists() else []:
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return out
