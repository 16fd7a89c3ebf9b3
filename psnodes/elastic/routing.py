"""The routing record in etcd: read it, and change it only by compare-and-swap.

One key per cluster (`<prefix>routing`) holds pschaos.psnodes.core.routing.Routing as JSON: the routing
epoch, the shard set keys are placed over, and the migration under way. Clients cache it and send
its epoch with every push and pull; nodes adopt it through their own log (ROUTE entries); the
migration coordinator (psnodes/elastic/migration.py) is the only writer, always by compare-and-swap on
the key's mod revision, so two coordinators can never both move the cluster.
"""
from __future__ import annotations

import json
from dataclasses import asdict

from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.core.routing import Migration, Routing, static
from pschaos.psnodes.etcd import Etcd


def to_json(r: Routing) -> str:
    d = asdict(r)
    d["shards"] = list(r.shards)
    if r.migration is not None:
        d["migration"] = {**asdict(r.migration), "src": list(r.migration.src), "dst": list(r.migration.dst)}
    return json.dumps(d, sort_keys=True)


def from_json(raw: bytes | str) -> Routing:
    d = json.loads(raw)
    m = d.get("migration")
    mig = Migration(str(m["id"]), tuple(int(s) for s in m["src"]), tuple(int(s) for s in m["dst"]),
                    str(m.get("phase", "copy"))) if m else None
    return Routing(int(d["epoch"]), tuple(sorted(int(s) for s in d["shards"])), mig)


def key(cfg: ClusterConfig) -> str:
    return f"{cfg.prefix}routing"


def read(etcd: Etcd, cfg: ClusterConfig) -> tuple[Routing, int]:
    """The record and its mod revision (0: never written, the static routing of the config)."""
    kv = etcd.get(key(cfg))
    if kv is None:
        return static(cfg.shards), 0
    return from_json(kv.value), kv.mod_revision


def swap(etcd: Etcd, cfg: ClusterConfig, revision: int, new: Routing) -> bool:
    """Write `new` iff the record is still at `revision`; raises EtcdError when etcd did not answer
    (the swap may then have landed or not: read the record again to know)."""
    return etcd.cas(key(cfg), revision, to_json(new))
