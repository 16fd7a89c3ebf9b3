"""etcd as the store: a three-member Raft cluster (Debian etcd-server 3.4) on 127.0.0.1.

An update is one transaction through etcd's JSON gateway (/v3): if the key's value is still
at the mod revision the client read, put the new count and sum and record the op id under
`ops/<key>/<op>`; a transaction whose compare failed did nothing (refused, read again). Reads
are etcd's default, linearizable ones. Each worker talks to one member and moves to the next
when it does not answer, as etcd's clients do. A partition drops every packet to or from the
member's peer port, and its clients still reach it on its client port. That is a one-way cut,
not isolation: etcd 3.4 carries a peer's raft messages to the member on the stream the member
dialed to the peer's port, which survives, so a cut leader still hears its followers while they
no longer hear it (portcut.py; the fault's `evidence` records the leader's term and index).
"""
from __future__ import annotations

import json

import requests

from pschaos.psnodes.etcd import Etcd, EtcdError

from pschaos.harness.machinery.tools import need
from pschaos.harness.backends.adapters.api import Adapter, Refused


class EtcdCluster(Adapter):
    name = "etcd"
    default_checks = ("no-lost-updates", "counters-match", "linearizable-reads")
    options = {"heartbeat_ms": (int, 100), "election_ms": (int, 1000), "request_timeout_s": (float, 2.0)}
    settle_s = 30.0

    def configure(self) -> None:
        self.exe = need("etcd")                  # MissingDependency with the install command
        ports = self.env.ports(2 * len(self.nodes))
        self.client_port = dict(zip(self.nodes, ports[::2]))
        self.peer_port = dict(zip(self.nodes, ports[1::2]))
        self.url = {n: f"http://127.0.0.1:{p}" for n, p in self.client_port.items()}
        self.member = {n: n.replace("/", "-") for n in self.nodes}

    def commands(self) -> dict[str, list[str]]:
        cluster = ",".join(f"{self.member[n]}=http://127.0.0.1:{self.peer_port[n]}" for n in self.nodes)
        o = self.opt
        return {n: [self.exe, "--name", self.member[n], "--data-dir", str(self.env.data(n)),
                    "--listen-client-urls", self.url[n], "--advertise-client-urls", self.url[n],
                    "--listen-peer-urls", f"http://127.0.0.1:{self.peer_port[n]}",
                    "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_port[n]}",
                    "--initial-cluster", cluster, "--initial-cluster-state", "new",
                    "--heartbeat-interval", str(o["heartbeat_ms"]), "--election-timeout", str(o["election_ms"]),
                    "--log-level", "warn", "--logger", "zap"] for n in self.nodes}

    def peer_ports(self, node: str) -> list[int]:
        return [self.peer_port[node]]

    def status(self, node: str) -> dict:
        r = requests.post(self.url[node] + "/v3/maintenance/status", data="{}", timeout=0.5)
        return r.json()

    def _statuses(self) -> dict[str, dict]:
        out = {}
        for n in self.nodes:
            try:
                out[n] = self.status(n)
            except (requests.RequestException, ValueError):
                continue
        return out

    def view(self, group: int = 0) -> tuple[int, str | None]:
        """(term, leader) as the member at the highest term has them, from one round of statuses."""
        st = self._statuses()
        ids = {s["header"]["member_id"]: n for n, s in st.items()}
        best = max(st.values(), key=lambda s: int(s["raftTerm"]), default=None)
        return (int(best["raftTerm"]), ids.get(best.get("leader"))) if best else (0, None)

    def primary(self, group: int = 0) -> str | None:
        return self.view(group)[1]

    def epoch(self, group: int = 0) -> int:
        return self.view(group)[0]

    def progress(self, node: str) -> dict | None:
        s = self.status(node)
        return {"term": int(s["raftTerm"]), "index": int(s["raftIndex"]),
                "leads": s.get("leader") == s["header"]["member_id"]}

    def ready(self) -> bool:
        st = self._statuses()
        return len(st) == len(self.nodes) and len({s.get("leader") for s in st.values()}) == 1 \
            and self.primary() is not None

    def settled(self) -> bool:
        st = self._statuses()
        return self.ready() and len({s.get("raftAppliedIndex", s["raftIndex"]) for s in st.values()}) == 1

    def client(self, worker: str) -> "EtcdClient":
        return EtcdClient(self, int(worker.rsplit("-", 1)[1]))

    def final(self, keys: list[str]) -> tuple[str, dict[str, dict]]:
        node = self.primary()
        etcd = Etcd(self.url[node], timeout=5.0)
        out = {}
        for k in keys:
            kv = etcd.get(f"c/{k}")
            v = json.loads(kv.value) if kv else {"count": 0, "sum": 0.0}
            out[k] = {"ops": sorted(int(x.key.rsplit("/", 1)[1]) for x in etcd.get_prefix(f"ops/{k}/")), **v}
        return node, out


class EtcdClient:
    def __init__(self, a: EtcdCluster, first: int) -> None:
        self.a, self.at = a, first % len(a.nodes)
        self.etcd = self._dial()

    def _dial(self) -> Etcd:
        return Etcd(self.a.url[self.a.nodes[self.at]], timeout=self.a.opt["request_timeout_s"])

    def _next(self) -> None:
        self.at = (self.at + 1) % len(self.a.nodes)
        self.etcd = self._dial()

    def update(self, key: str, op: int, amount: float) -> str:
        node = self.a.nodes[self.at]
        try:
            kv = self.etcd.get(f"c/{key}")
        except EtcdError as e:                  # nothing was written yet: surely not applied
            self._next()
            raise Refused(f"read before the update: {e}") from None
        cur = json.loads(kv.value) if kv else {"count": 0, "sum": 0.0}
        new = json.dumps({"count": cur["count"] + 1, "sum": cur["sum"] + amount})
        try:
            ok = self.etcd.cas(f"c/{key}", kv.mod_revision if kv else 0, new, also_put=[(f"ops/{key}/{op}", "1", 0)])
        except EtcdError:
            self._next()
            raise
        if not ok:
            raise Refused("the key moved since it was read")
        return node

    def read(self, key: str) -> int:
        try:
            kv = self.etcd.get(f"c/{key}")
        except EtcdError:
            self._next()
            raise
        return json.loads(kv.value)["count"] if kv else 0

    def close(self) -> None:
        self.etcd.close()
