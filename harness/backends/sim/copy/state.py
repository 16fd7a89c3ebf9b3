"""The copy as its sides see it: what process.py, replication.py, checkpoint.py, migrate.py,
members.py, election.py, probe.py, acks.py, status.py and procs.py read, set and call on it.

The real node's parts are methods of one ShardNode sharing its state under one lock; the twin
keeps that sharing (one copy, touched by one SimPy process at a time) but splits the methods
into sides the copy owns. Each side is handed the copy typed as this protocol, never as SimCopy,
so no side imports copy.py and the package's imports run one way: copy.py down to its sides,
the sides down to this module and values.py.

`Peer` is the little a copy is to another one of its shard: alive or not (and when a killed
one's sockets close), and the two calls a sender and a prober make into it.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

import simpy

from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.core import membership
from pschaos.psnodes.core.detector import Detector
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.store import ShardStore

from pschaos.harness.backends.sim.clock import SimClock
from pschaos.harness.backends.sim.cpu import SimCPU
from pschaos.harness.backends.sim.disk import SimDisk
from pschaos.harness.backends.sim.etcd import SimEtcd
from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.harness.backends.sim.copy.values import ClientWatch, ReplicateReq, RestorePlan


class Peer(Protocol):
    """Another copy of the shard, to a primary's sender or a prober."""

    alive: bool
    closed_at: float          # when a killed copy's sockets close (virtual time; rpc.refused)
    accepting: bool           # its gRPC server takes new calls
    paused: bool              # SIGSTOPped: a channel's reconnect attempt to it fails (reconnect.py)

    def replicate(self, req: ReplicateReq, deadline: float) -> Gen: ...

    def serve_status(self, req: ps_pb2.StatusRequest, deadline: float) -> Gen: ...


class CopyState(Peer, Protocol):
    """One copy `shard-<i>/<r>` (copy.py's SimCopy): its wiring, its process, its replication
    state, and the methods that keep them consistent (the sides call these rather than setting
    role, epoch or lease fields one by one)."""

    # wiring: the simulation it runs in, and who it is
    env: simpy.Environment
    clock: SimClock
    etcd: SimEtcd
    net: SimNetwork
    cfg: ClusterConfig
    disk: SimDisk
    name: str
    shard: int
    slot: int

    # the CPU model (harness/backends/sim/cpu.py): the host's cores and the calibration's costs
    cpu: SimCPU | None
    request_s: float
    apply_s_per_mb: float
    send_s: float
    replicate_extra_s: float
    idle_cpu_s: float
    replicate_load: list[int]

    # the process: its incarnations, the processes it runs, serve.py's flags and hooks
    incarnation: int
    session: int
    procs: list[simpy.Process]
    start_delay_s: float
    started: bool
    stopping: bool
    answering: bool
    done: simpy.Event
    on_promote: Callable[[], None]
    on_start: Callable[[], None]
    on_stop: Callable[[float], simpy.Event] | None

    # replication state, as ShardNode holds it
    store: ShardStore
    role: str
    epoch: int
    primary: str
    isr: list[str]
    epoch_start: int
    last_heard: float
    in_sync: bool
    peer_seq: dict[str, int]
    peer_heard: dict[str, float]
    detector: Detector
    suspecting: int
    verified: set[tuple[int, str]]
    lease: int
    lease_until: float
    lease_seen: float
    restored_from: str
    ckpt_lock: simpy.Resource
    isr_lock: simpy.Resource

    # plumbing
    def now(self) -> float: ...

    def emit(self, f: str, value: dict, type_: str = "info") -> None: ...

    def notify(self) -> None: ...

    def wait_change(self, timeout: float) -> Gen: ...

    def ecall(self, fn: Callable[[], Any], timeout: float = ...) -> Gen: ...

    def replicate_work(self, nbytes: int) -> float: ...

    def writer_tag(self) -> str: ...

    # roles, lease and the checks every handler makes
    def adopt_members(self, rec: membership.Record) -> None: ...

    def is_primary(self, epoch: int | None = None) -> bool: ...

    def become_primary(self, rec: ShardRecord, bootstrap: bool = False) -> None: ...

    def follow(self, epoch: int, primary: str, epoch_start: int) -> None: ...

    def fenced(self, reason: str) -> Gen: ...

    def renew_lease(self, sent: float, ttl: float) -> None: ...

    def lease_valid(self) -> bool: ...

    def lease_lost(self, reason: str) -> bool: ...

    def check_lease(self) -> None: ...

    def check_shard(self, shard: int, method: str) -> None: ...

    def check_primary(self, client_epoch: int) -> None: ...

    def fresh(self) -> None: ...

    # what one side offers another, through the copy
    def spawn(self, gen: Gen) -> simpy.Process: ...

    def serve(self, handler: Callable[[], Gen], deadline: float, watch: ClientWatch | None = None,
              work: float = 0.0, work_after: bool = False) -> Gen: ...

    def kill(self) -> None: ...

    def exit(self) -> None: ...

    def checkpoint(self, shared: bool | None = None) -> Gen: ...

    def load_local(self) -> None: ...

    def plan_restore(self) -> RestorePlan: ...

    def adopt_restore(self, plan: RestorePlan, routing_rec: Routing, epoch: int) -> None: ...


__all__ = ["CopyState", "Peer"]
