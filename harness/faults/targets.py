"""Resolve fault targets at fault time from the live routing table.

A target is a node pattern (`shard-0/1`, `worker-2`, `etcd`, `primary(shard=0)`, `replica(shard=any)`,
`replicas(shard=0)`, `shard(1)`, `nodes`, `workers`, `worker(any)`) or, for link faults, two
patterns joined by `->` (those directed links) or `<->` (both directions), or one of Jepsen's
partition shapes over a shard's copies and etcd: `halves(shard=N|any)`, `bridge(shard=N|any)`,
`majorities-ring(shard=N|any)` (shape_cuts). Every random choice
comes from the run's seeded generator, and what was chosen is recorded by name.
"""
from __future__ import annotations

import random
import re

from pschaos.harness.errors import HarnessError

NODE = r"(shard-\d+/\d+|worker-\d+|rank-\d+|ps-\d+|agent|chief|coordinator|etcd|nodes|workers|(primary|replica)\(shard=(\d+|any)\)|replicas\(shard=(\d+|any)\)|shard\((\d+|any)\)|worker\((\d+|any)\))"
NODE_RE = re.compile(f"^{NODE}$")
LINK_RE = re.compile(f"^{NODE}(->|<->){NODE}$")
# Jepsen's partition shapes over one shard's copies and etcd, drawn from the run's seed at fault time
SHAPE_RE = re.compile(r"^(halves|majorities-ring|bridge)\(shard=(\d+|any)\)$")


def is_link_target(target: str) -> bool:
    t = target.replace(" ", "")
    return "->" in t or bool(SHAPE_RE.match(t))


def valid_target(target: str) -> bool:
    t = target.replace(" ", "")
    return bool(NODE_RE.match(t) or LINK_RE.match(t) or SHAPE_RE.match(t))


def _shard(backend, arg: str, rng: random.Random) -> int:
    routes = backend.routing()
    shard = rng.choice(sorted(routes)) if arg == "any" else int(arg)
    if shard not in routes:
        raise HarnessError(f"shard {shard} does not exist (shards: {sorted(routes)})")
    return shard


def _shard_with_a_live_replica(backend, rng: random.Random) -> int:
    """`replica(shard=any)`: a shard drawn among those with a live replica. When every shard has
    one this is the same draw as `_shard`'s (a seed's schedule is unchanged); a shard whose
    replicas are all down is not drawn (nemesis-soak seeds 144, 162 and 183: the draw fell on such
    a shard while a kill timed to a promotion held two copies down, and the run was unknown)."""
    routes = backend.routing()
    live = [s for s in sorted(routes)
            if any(n != routes[s].primary and backend.alive(n) for n in backend.shard_nodes(s))]
    if not live:
        raise HarnessError("target replica(shard=any): no shard has a live replica")
    return rng.choice(live)


def resolve_group(pattern: str, backend, rng: random.Random) -> list[str]:
    """All names a node pattern stands for now (a single-node selector gives one)."""
    p = pattern.replace(" ", "")
    if p == "nodes":
        return backend.nodes()
    if p == "workers":   # every worker the cluster has links for, running or not yet started
        known = set(backend.workers())
        known |= {s for s, _ in backend.links() or [] if s.startswith("worker-")}
        return sorted(known, key=lambda w: int(w.split("-")[1]))
    if m := re.match(r"^shard\((\d+|any)\)$", p):
        return backend.shard_nodes(_shard(backend, m.group(1), rng))
    if m := re.match(r"^replicas\(shard=(\d+|any)\)$", p):
        shard = _shard(backend, m.group(1), rng)
        prim = backend.routing()[shard].primary
        return [n for n in backend.shard_nodes(shard) if n != prim]
    return [resolve(p, backend, rng)]


def resolve(target: str, backend, rng: random.Random) -> str:
    """One node name for a single-node target."""
    t = target.replace(" ", "")
    if m := re.match(r"^(primary|replica)\(shard=(\d+|any)\)$", t):
        if m.group(1) == "replica" and m.group(2) == "any":
            shard = _shard_with_a_live_replica(backend, rng)
        else:
            shard = _shard(backend, m.group(2), rng)
        rec = backend.routing()[shard]
        if m.group(1) == "primary":
            return rec.primary
        replicas = [n for n in backend.shard_nodes(shard) if n != rec.primary and backend.alive(n)]
        if not replicas:
            raise HarnessError(f"target {target}: shard {shard} has no live replica")
        return rng.choice(sorted(replicas))
    if m := re.match(r"^worker\((\d+|any)\)$", t):
        workers = sorted(w for w in backend.workers() if backend.alive(w))
        if m.group(1) == "any":
            if not workers:
                raise HarnessError(f"target {target}: no live worker")
            return rng.choice(workers)
        return f"worker-{m.group(1)}"
    if t in ("nodes", "workers") or t.startswith(("shard(", "replicas(")):
        raise HarnessError(f"target {target} names a group; this fault needs one node")
    return t


def shape_cuts(shape: str, members: list[str], rng: random.Random) -> set[frozenset[str]]:
    """The pairs a partition shape cuts among `members` (shuffled here by `rng`):
    `halves`: two random halves, no pair across them;
    `bridge`: one member sees everyone, the others are split in two halves that cannot talk;
    `majorities-ring`: the members in a random ring, each one reaching only its nearest
    neighbours (with itself a majority: 3 of 4 or 5), so every member sees a different majority."""
    ms = list(members)
    rng.shuffle(ms)
    n = len(ms)
    if shape == "halves":
        a, b = ms[:n // 2], ms[n // 2:]
        return {frozenset((x, y)) for x in a for y in b}
    if shape == "bridge":
        rest = ms[1:]
        a, b = rest[:len(rest) // 2], rest[len(rest) // 2:]
        return {frozenset((x, y)) for x in a for y in b}
    reach = max(1, (n // 2) // 2)
    return {frozenset((ms[i], ms[j])) for i in range(n) for j in range(i + 1, n)
            if min(j - i, n - (j - i)) > reach}


def resolve_shape(target: str, backend, rng: random.Random) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """The directed links a partition shape cuts, among the shard's copies and etcd; the first
    group is the copies cut from etcd (a primary there loses its lease), the second the rest."""
    m = SHAPE_RE.match(target.replace(" ", ""))
    shard = _shard(backend, m.group(2), rng)
    members = sorted(backend.shard_nodes(shard)) + ["etcd"]
    cuts = shape_cuts(m.group(1), members, rng)
    links = sorted(k for k in (backend.links() or []) if frozenset(k) in cuts)
    no_etcd = sorted(n for n in members if n != "etcd" and frozenset((n, "etcd")) in cuts)
    return links, no_etcd, [n for n in members if n not in no_etcd]


def resolve_links(target: str, backend, rng: random.Random) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """The directed links of an `A -> B` or `A <-> B` target (or a partition shape), with the two groups."""
    t = target.replace(" ", "")
    if SHAPE_RE.match(t):
        return resolve_shape(t, backend, rng)
    both = "<->" in t
    a, b = t.split("<->" if both else "->")
    ga, gb = resolve_group(a, backend, rng), resolve_group(b, backend, rng)
    every = backend.links() or []
    links = _select(every, set(ga), set(gb))
    if both:
        links += _select(every, set(gb), set(ga))
    return sorted(set(links)), ga, gb


def _select(links: list[tuple[str, str]], srcs: set[str], dsts: set[str]) -> list[tuple[str, str]]:
    return sorted(k for k in links if k[0] in srcs and k[1] in dsts)


# what a nemesis aims a fault at when its scenario names no target for the kind (run/nemesis.py)
DEFAULT_TARGETS = {
    "kill": "replica(shard=any)", "stop": "replica(shard=any)", "restart": "replica(shard=any)",
    "pause": "primary(shard=any)",
}
DEFAULT_LINK_TARGET = "workers -> shard(any)"


def default_target(kind: str) -> str:
    """What a nemesis aims a fault of `kind` at when its scenario names no target for it."""
    from pschaos.harness.faults import LINK_KINDS

    return DEFAULT_LINK_TARGET if kind in LINK_KINDS else DEFAULT_TARGETS.get(kind, "replica(shard=any)")
