"""An in-process cluster for unit tests: real gRPC servers around ShardNodes, no etcd.

Each shard has one copy, made primary by hand; the client's routing table is filled in
directly, so nothing dials etcd. Enough to test the client/node contract (idempotency keys,
audit tensor, re-INIT) without processes.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.server.servicer import make_server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class InProc:
    cfg: ClusterConfig
    nodes: dict[int, ShardNode]
    servers: list = field(default_factory=list)
    clients: list[PSClient] = field(default_factory=list)

    def client(self, name: str = "worker-0", events: Path | None = None) -> PSClient:
        c = PSClient(self.cfg, name, dict(self.cfg.addresses), EventLog(events, name), retry_budget=2.0)
        for s, node in self.nodes.items():
            c.routes[s] = ShardRecord(epoch=1, primary=node.name, isr=[node.name])
        self.clients.append(c)
        return c

    def close(self) -> None:
        for c in self.clients:
            c.close()
        for srv in self.servers:
            srv.stop(0)


def start(tmp: Path, shards: int = 1, mode: str = "async", optimizer: str = "adam",
          tables: dict[str, int] | None = None, rpc_threads: int = 4, rpc_reserve: int = 2) -> InProc:
    names = [f"shard-{s}/0" for s in range(shards)]
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=shards, copies=1, workers=2,
                        mode=mode, optimizer={"name": optimizer, "lr": 0.01}, workdir=str(tmp),
                        tables={"emb": 4} if tables is None else tables,
                        addresses={n: f"127.0.0.1:{free_port()}" for n in names})
    ip = InProc(cfg, {})
    for s, n in enumerate(names):
        node = ShardNode(cfg, n, dict(cfg.addresses), etcd=None, events=EventLog(None, n))
        node.become_primary(ShardRecord(epoch=1, primary=n, isr=[n]))
        srv = make_server(node, cfg.addresses[n], workers=rpc_threads, reserve=rpc_reserve)
        srv.start()
        ip.nodes[s], ip.servers = node, [*ip.servers, srv]
    return ip
