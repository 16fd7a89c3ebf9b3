"""What a worker or client needs of the machine, in one replaceable place: clocks, sleep, threads.

The real processes use the machine's; the harness's simulator passes its virtual ones (and its own
transport to the client), so the worker and client code that runs in a simulated scenario is this
very code, not a model of it (DESIGN.md: one core, two shells)."""
from __future__ import annotations

import os
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable


@dataclass
class Runtime:
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    time: Callable[[], float] = time.time            # wall seconds: event times, incarnations
    pid: Callable[[], int] = os.getpid
    # the time a worker's step computation takes: on a machine it is simply spent; the simulator
    # charges its calibrated figure in virtual time here (the gradients themselves are computed)
    compute: Callable[[str], None] = lambda what: None
    pool: Callable[[int, str], Executor] = field(
        default=lambda n, prefix: ThreadPoolExecutor(max_workers=n, thread_name_prefix=prefix))


REAL = Runtime()

__all__ = ["REAL", "Runtime"]
