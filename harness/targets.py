"""Resolve fault targets: names stay names, selectors are resolved at fault time from the live
routing table, with every random choice drawn from the run's seeded generator."""
from __future__ import annotations

import random
import re

from .errors import HarnessError

SEL = re.compile(r"^(primary|replica)\(shard=(\d+|any)\)$")
WSEL = re.compile(r"^worker\((\d+|any)\)$")


def resolve(target: str, backend, rng: random.Random) -> str:
    m = SEL.match(target)
    if m:
        routes = backend.routing()
        shard = rng.choice(sorted(routes)) if m.group(2) == "any" else int(m.group(2))
        if shard not in routes:
            raise HarnessError(f"target {target}: shard {shard} does not exist (shards: {sorted(routes)})")
        rec = routes[shard]
        if m.group(1) == "primary":
            return rec.primary
        replicas = [n for n in backend.cfg.shard_nodes(shard) if n != rec.primary and backend.alive(n)]
        if not replicas:
            raise HarnessError(f"target {target}: shard {shard} has no live replica")
        return rng.choice(sorted(replicas))
    m = WSEL.match(target)
    if m:
        workers = sorted(w for w in backend.workers() if backend.alive(w))
        if m.group(1) == "any":
            if not workers:
                raise HarnessError(f"target {target}: no live worker")
            return rng.choice(workers)
        return f"worker-{m.group(1)}"
    return target
