"""BSP/SSP gating: a worker's pull waits until the slowest expected worker reached a clock.

Each push carries the worker's step (its clock); the shard keeps the highest step + 1 per worker.
BSP waits for every worker to finish the previous step, SSP lets a worker run at most
`staleness` steps ahead, async never waits.
"""
from __future__ import annotations

from typing import Mapping


def min_clock(clocks: Mapping[str, int], workers: int) -> int:
    """The slowest expected worker's clock (workers <= 0: of those seen so far)."""
    if workers <= 0:
        return min(clocks.values(), default=0)
    return min(clocks.get(f"worker-{j}", 0) for j in range(workers))


def advance(clocks: Mapping[str, int], worker: str, clock: int) -> int:
    """A worker's clock after a push of step `clock` (< 0: the push carries no clock)."""
    cur = clocks.get(worker, 0)
    return cur if clock < 0 else max(cur, clock + 1)


def ready(wanted: int, slowest: int) -> bool:
    """A pull asking for clock `wanted` (< 0: no wait) may be served."""
    return wanted < 0 or slowest >= wanted


def wanted_clock(mode: str, step: int, staleness: int) -> int:
    """The clock a worker's pull at `step` waits for: BSP the step, SSP step - staleness, else none."""
    if mode == "bsp":
        return step
    if mode == "ssp":
        return max(0, step - staleness)
    return -1
