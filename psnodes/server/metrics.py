"""Prometheus metrics of one node: pushes, pulls, bytes, replication lag, epoch, role."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

ROLES = ("starting", "replica", "primary")


class NodeMetrics:
    def __init__(self, node: str) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.pushes = Counter("ps_pushes", "pushes applied", registry=r)
        self.duplicates = Counter("ps_duplicate_pushes", "retried pushes answered without applying", registry=r)
        self.pulls = Counter("ps_pulls", "pulls served", registry=r)
        self.push_bytes = Counter("ps_push_bytes", "payload bytes of applied pushes", registry=r)
        self.pull_bytes = Counter("ps_pull_bytes", "bytes of pull replies", registry=r)
        self.replication_bytes = Counter("ps_replication_bytes", "bytes sent to replicas", registry=r)
        self.sync_bytes = Counter("ps_catchup_bytes", "bytes sent to catch lagging replicas up", registry=r)
        self.lag = Gauge("ps_replication_lag_entries", "entries a replica trails the primary", ["peer"], registry=r)
        self.epoch = Gauge("ps_epoch", "current epoch of the shard as this node knows it", registry=r)
        self.seq = Gauge("ps_seq", "applied sequence number", registry=r)
        self.role = Gauge("ps_role", "1 for the node's current role", ["role"], registry=r)
        self.failovers = Counter("ps_promotions", "times this node was promoted", registry=r)
        self.busy = Counter("ps_busy_refusals", "pushes and pulls refused at the bulkhead (every waiting slot taken; "
                                                "the client retried them)", ["method"], registry=r)

    def set_role(self, role: str) -> None:
        for r in ROLES:
            self.role.labels(role=r).set(1 if r == role else 0)

    def serve(self, port: int) -> None:
        start_http_server(port, addr="127.0.0.1", registry=self.registry)
