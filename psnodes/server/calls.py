"""The two bounds of a call a node serves: its deadline (`deadline_of`) and its caller giving up
(`given_up`, from grpc's context.is_active).

Every wait of the node (replication, follower lease, replication lag, the BSP/SSP barrier) checks
both, so no RPC thread is held past the caller's interest. They stand apart from the node so that
its layers (primacy.py, checkpointing.py, node.py) and the servicer share them without importing
one another.
"""
from __future__ import annotations

import time
from typing import Callable

import grpc

from pschaos.psnodes.errors import Cancelled

MAX_WAIT_S = 10.0               # no call waits longer on the server (BSP/SSP pulls wait the longest)


def always() -> bool:
    """The `active` of a call nobody can cancel (one made in-process)."""
    return True


def given_up(active: Callable[[], bool], what: str) -> None:
    """Raise Cancelled when the caller gave the call up (`active`: grpc's context.is_active):
    a wait for it would hold an RPC thread to its deadline for an answer nobody reads (the
    client's deposed-primary watch cancels calls to a primary it saw replaced)."""
    if not active():
        raise Cancelled(f"{what}: the caller cancelled the call; the wait ended")


def deadline_of(context: grpc.ServicerContext, default: float) -> float:
    """When a call must be answered by: the client's deadline, capped at max(default, 10 s), so a
    client asking for a day (a BSP pull with min_clock 2**63-1) cannot hold a server thread."""
    left = context.time_remaining() if context is not None else None
    if left is None or left > 1e6:
        left = default
    return time.monotonic() + max(0.0, min(left, max(default, MAX_WAIT_S)) - 0.02)
