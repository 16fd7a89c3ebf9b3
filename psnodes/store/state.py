"""What a shard is told (ShardSpec) and what it holds (ShardState): the fields of one shard copy.

ShardStore (store.py) is built of parts that each work on these fields: the checks of an update
(checks.py), the reads (reads.py), the whole-state views and blobs (whole_state.py), and elastic
shards' ownership, fences and migrations (moving.py). Each part imports this module and none
imports ShardStore, which composes them: so no module of the store imports another in a loop.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pschaos.psnodes.store.applied import AppliedSet
from pschaos.psnodes.store.embedding import EmbeddingTable
from pschaos.psnodes.store.optimizers import OptimizerConfig
from pschaos.psnodes.store.updatelog import UpdateLog
from pschaos.psnodes.wire.limits import Limits


@dataclass
class ShardSpec:
    """What a shard needs to know to check and apply updates."""

    shard: int
    num_shards: int
    tables: dict[str, int] = field(default_factory=dict)   # table name -> dim
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    seed: int = 0
    workers: int = 0                                        # expected workers, for BSP/SSP clocks
    log_entries: int = 4096
    log_bytes: int = 256 << 20
    limits: Limits = field(default_factory=Limits)
    max_reply_bytes: int = 256 << 20                        # the gRPC message limit of the node


class ShardState:
    """The state of one shard copy, as fields: what every part of ShardStore, and moving.py's
    functions, read and change. It holds no behaviour, so those parts need only this, not each other."""

    def __init__(self, spec: ShardSpec) -> None:
        self.spec = spec
        self.dense: dict[str, np.ndarray] = {}
        self.dense_slots: dict[str, dict[str, np.ndarray]] = {}
        self.dense_steps: dict[str, int] = {}
        self.dense_mod: dict[str, int] = {}
        self.tables = {name: EmbeddingTable(name, dim, spec.optimizer, spec.seed)
                       for name, dim in spec.tables.items()}
        self.applied = AppliedSet()
        self.clocks: dict[str, int] = {}
        self.pushes = 0                    # PUSH updates applied
        self.seq = 0
        self.seq_epoch = 0
        self.epochs: list[list[int]] = []   # [epoch, first seq] each time the epoch changed
        self.log = UpdateLog(spec.log_entries, spec.log_bytes)
        # elastic shards (psnodes/store/moving.py): the routing epoch and shard set the log has reached,
        # the fence of a migration in progress, migrated dedup state, imports taken
        self.routing_epoch = 0
        self.shards: tuple[int, ...] = tuple(range(spec.num_shards))
        self.fence: dict | None = None
        self.foreign: dict[str, list[list[int]]] = {}
        self.imported: list[str] = []
        self.shape_seq = 0                 # the last entry that removed keys (catch-up by snapshot before it)
