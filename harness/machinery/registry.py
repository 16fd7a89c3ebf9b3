"""A record of live runs on this machine, so `pschaos clean` knows what a dead run left.

Each run writes one small file naming its owner pid and its nftables table; teardown removes
it. Processes carry the same run id in their environment (see procs.py).
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

DIR = Path(os.environ.get("PSCHAOS_RUNS_DIR", Path(tempfile.gettempdir()) / "pschaos-runs"))
RUN_MARKER = ".pschaos-run"      # in every run folder the runner makes: a reused --out deletes only those


def made_by_a_run(folder: Path) -> bool:
    """A run folder (`--out`/run) a pschaos run made: its marker, or (before markers) its events/
    folder. Only such a folder is ever deleted to reuse an --out: never someone's own /run."""
    return (folder / RUN_MARKER).is_file() or (folder / "events").is_dir()


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
