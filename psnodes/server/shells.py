"""What pschaos.psnodes.server.ownership reads of the shells that run it, as Protocols.

Elastic shards' checks and Migrate decisions (ownership.py) run in two shells: the real node
(psnodes/server/node.py, whose layer primacy.py holds what is named here) and the SimPy twin
(harness/backends/sim/copy/ (copy.py with migrate.py)). Typing a copy by what ownership reads of
it, not by either shell's class, keeps ownership.py below both: the node imports ownership,
never the other way round.
"""
from __future__ import annotations

import threading
from typing import Callable, Protocol

from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.etcd import Etcd
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.server.metrics import NodeMetrics
from pschaos.psnodes.store.store import ShardStore


class ShardCopy(Protocol):
    """A copy of a shard as the checks of a call read it, in both shells (`check_call`,
    `check_push`, `check_pull`): its node name, its shard and its store."""

    name: str
    shard: int
    store: ShardStore


class PrimaryShell(ShardCopy, Protocol):
    """The real node as ownership's shell drives it (`sync_routing`, `adopt`, `append`, `migrate`):
    its config and etcd client, its lock and epoch, and the checks and ack waits of a primary."""

    cfg: ClusterConfig
    etcd: Etcd | None
    events: EventLog
    metrics: NodeMetrics
    cond: threading.Condition
    peer_seq: dict[str, int]

    @property
    def epoch(self) -> int: ...

    def _check_primary(self, client_epoch: int) -> None: ...

    def _check_shard(self, shard: int, method: str) -> None: ...

    def _wait_replicated(self, seq: int, epoch: int, deadline: float,
                         active: Callable[[], bool] = ...) -> None: ...

    def _wait_followers(self, epoch: int, deadline: float, active: Callable[[], bool] = ...) -> None: ...
