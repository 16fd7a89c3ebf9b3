"""What the process backend reads of a running cluster: the routing table (from etcd, or from the
live copies while etcd is down), a copy's status and final state, its checkpoints as they lie on
disk, and which processes are alive. Kept apart from starting and signalling them (backend.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import grpc

from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.etcd import Etcd, EtcdError
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc
from pschaos.psnodes.wire.channels import dial

from pschaos.harness.backends.observe import routes_from_copies
from pschaos.harness.checkers.scan import scan_folder


class ProcessObservation:
    """The observation side of ProcessBackend (its base class): every read of the cluster that the
    runner and the checkers' evidence need, and none that changes it."""

    def routing_record(self):
        """The routing record in etcd (pschaos.psnodes.core.routing.Routing), None while etcd is down."""
        from pschaos.psnodes.elastic import routing

        try:
            return routing.read(Etcd(self.cfg.etcd, timeout=0.5), self.cfg)[0]
        except EtcdError:
            return None

    def migration_phase(self) -> str:
        """The phase of the migration in the routing record ('' when none, or etcd is down)."""
        rec = self.routing_record()
        return rec.migration.phase if rec is not None and rec.migration else ""

    def alive(self, name: str) -> bool:
        if name == "etcd":
            return self.etcd_server.proc is not None and self.etcd_server.proc.alive()
        p = self.procs.get(name)
        return p is not None and p.alive()

    def routing(self) -> dict[int, ShardRecord]:
        """The routing table from etcd; while etcd is down, as the live nodes themselves report it."""
        etcd = Etcd(self.cfg.etcd, timeout=1.0)
        out = {}
        try:
            for i in self.active:
                kv = etcd.get(self.cfg.shard_key(i))
                if kv is not None:
                    out[i] = ShardRecord.from_json(kv.value)
            return out
        except EtcdError:
            pass
        return routes_from_copies(self.nodes(), self.alive, self.status)

    def status(self, name: str, checksum: bool = False, applied: bool = False, timeout: float = 2.0,
               audit: bool = False):
        try:
            return self.client.status(name, checksum=checksum, applied=applied, timeout=timeout, audit=audit)
        except grpc.RpcError:
            return None

    def status_when_up(self, name: str, timeout: float) -> object | None:
        """The first Status answer of a copy that is starting, as soon as its server listens: the
        call waits for the connection (wait_for_ready, a fresh channel, so no reconnect backoff
        left by the copy's death delays it) rather than failing until it connects. A moment right
        after a start (a catch-up, milliseconds long on loopback) is seen this way, or never."""
        ch = dial(self.client.links[name], self.cfg.max_message_bytes)
        try:
            return ps_pb2_grpc.ParameterServerStub(ch).Status(ps_pb2.StatusRequest(), timeout=timeout,
                                                              wait_for_ready=True, metadata=self.client.md)
        except grpc.RpcError:
            return None
        finally:
            ch.close()

    def final_state(self, name: str, under: list[int] | None = None) -> dict | None:
        """A copy's state as the checks read it; its holdings sorted by owner under `under` (the
        routing record's shard set as the harness read it; None: the copy's own routing)."""
        try:
            st = self.client.status(name, checksum=True, applied=True, audit=True, holdings=list(under or []))
        except grpc.RpcError:
            return None
        return {"role": st.role, "epoch": st.epoch, "seq": st.seq, "checksum": st.checksum, "pushes": st.pushes,
                "applied": json.loads(st.applied_json or "{}"), "restored_from": st.restored_from,
                "audit": json.loads(st.audit_json) if st.audit_json else None,
                "buckets": json.loads(st.buckets_json) if st.buckets_json else None,
                "routing_epoch": st.routing_epoch, "routing_shards": list(st.routing_shards), "fence": st.fence,
                "holdings": json.loads(st.holdings_json) if st.holdings_json else None}

    def checkpoint_scan(self) -> list[dict]:
        """Every checkpoint folder under the work dir: does its manifest name a whole, loadable file?"""
        work = Path(self.cfg.workdir)
        return self.scan_tree(work, work)

    @staticmethod
    def scan_tree(root: Path, rel_to: Path) -> list[dict]:
        """`scan_entry` for every manifest below `root`, its folder named relative to `rel_to`."""
        from pschaos.psnodes.store.checkpoint import MANIFEST

        return [scan_folder(str(man.parent.relative_to(rel_to)), man.parent) for man in sorted(root.glob(f"**/{MANIFEST}"))]

    def workers_running(self) -> bool:
        return any(self.procs[w].alive() for w in self.workers())

    def checkpoint_writes(self, name: str) -> list[str]:
        """The `*.tmp` files in the node's data folder and its shard's checkpoint folder (none for a
        worker or etcd: they write no checkpoints)."""
        if not name.startswith("shard-"):
            return []
        shard = int(name.split("-")[1].split("/")[0])
        dirs = [self.data_path(name), Path(self.cfg.checkpoint_dir(shard))]
        return [str(tmp) for d in dirs if d.exists() for tmp in d.glob("*.tmp")]
