"""What the event handlers and the summary see of a scale run: its tally, and the state they
read and change as a Protocol that ScaleRun (engine.py) satisfies. The parts take a run typed by
it, so engine.py imports its handlers and its summary and none of them imports the engine.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pschaos.psnodes.core.promotion import Position

from pschaos.harness.backends.sim.calibration import Calibration
from pschaos.harness.backends.sim.scale.params import ScaleSpec, Timings
from pschaos.harness.backends.sim.scale.shards import Shard


@dataclass
class Tally:
    """What a scale run counts as it goes: the figures of its summary."""

    failovers: int = 0
    spurious_failovers: int = 0
    failover_ms: list[float] = field(default_factory=list)          # a primary's loss until acks resume
    spurious_ms: list[float] = field(default_factory=list)          # the same after a live primary was suspected
    lost_acked_updates: int = 0
    data_loss_events: int = 0
    shards_lost: set = field(default_factory=set)      # shards whose restore lost acked updates
    orphaned: set = field(default_factory=set)         # shards that had no in-sync copy left at some moment
    restores: int = 0
    incidents: list = field(default_factory=list)      # [t, ms, what]: failovers and restores
    worker_failures: int = 0
    server_failures: int = 0
    etcd_failures: int = 0
    catchups: dict = field(default_factory=dict)
    catchup_bytes: float = 0.0
    stalled_s: float = 0.0
    shard_down_s: float = 0.0
    ticks: int = 0


class RunState(Protocol):
    """The members of ScaleRun (engine.py) that handlers.py and summary.py use."""

    spec: ScaleSpec
    cal: Calibration
    cal_path: str | None
    t: Timings
    misc: np.random.Generator
    now: float
    events: int
    shards: list[Shard]
    worker_up: np.ndarray
    worker_life: np.ndarray
    worker_steps: np.ndarray
    global_steps: float
    series: list[tuple[float, float]]
    tally: Tally
    target_at: float | None
    bsp: float | None
    suspect_rate: float
    etcd_up: bool
    lease_ok: bool
    etcd_life: int
    deferred: list[tuple[str, tuple]]

    def at(self, t: float, kind: str, *args: Any) -> None: ...
    def draw_failure(self, server: bool) -> float | None: ...
    def draw_repair(self, server: bool) -> float: ...
    def effective_steps(self) -> float: ...
    def checkpoint_of(self, s: int) -> Position | None: ...
    def head(self, s: int) -> int: ...
    def lose(self, s: int, n: int) -> None: ...
    def async_lag(self) -> float: ...
    def sync_copies(self, sh: Shard) -> None: ...
    def stop_acks(self, s: int) -> None: ...
    def resume_acks(self, s: int) -> None: ...
