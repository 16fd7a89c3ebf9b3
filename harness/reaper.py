"""`pschaos clean`: reap what killed runs left behind (processes tagged with a run id)."""
from __future__ import annotations

from .procs import orphaned, reap, tagged_processes


def clean(all_runs: bool = False) -> int:
    procs = [p for p in tagged_processes() if all_runs or orphaned(p)]
    done = reap(procs)
    for d in done:
        print(f"reaped {d}")
    print(f"pschaos clean: {len(done)} process(es) reaped")
    return 0
