"""BSP/SSP clocks: what a push moves and what a pull waits for.

Each push carries the worker's step (its clock); the shard keeps the highest step + 1 per worker.
BSP waits for every member to finish the previous step, SSP lets a worker run at most
`staleness` steps ahead, async never waits. Whom a pull waits for is the membership generation
the copy holds (psnodes/core/membership.py), not a fixed set of workers.
"""
from __future__ import annotations

from typing import Mapping


def advance(clocks: Mapping[str, int], worker: str, clock: int) -> int:
    """A worker's clock after a push of step `clock` (< 0: the push carries no clock)."""
    cur = clocks.get(worker, 0)
    return cur if clock < 0 else max(cur, clock + 1)


def wanted_clock(mode: str, step: int, staleness: int) -> int:
    """The clock a worker's pull at `step` waits for: BSP the step, SSP step - staleness, else none."""
    if mode == "bsp":
        return step
    if mode == "ssp":
        return max(0, step - staleness)
    return -1
