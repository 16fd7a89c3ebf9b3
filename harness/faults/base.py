"""The shape every harness fault has: inject, heal, and what it records in the history."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from pschaos.harness.history.clock import Clock, clock_of


@dataclass
class FaultContext:
    """What a fault may touch: the backend (through the Backend protocol only), the seeded
    generator, a way to write history, and the clock it waits on (the backend's)."""

    backend: Any
    rng: random.Random
    record: Callable[[str, dict], dict]
    steps: int = 0
    step_delay: float = 0.0
    clock: Clock | None = None

    def __post_init__(self) -> None:
        if self.clock is None:
            self.clock = clock_of(self.backend)


@dataclass
class Fault:
    kind: ClassVar[str] = ""
    params_spec: ClassVar[dict] = {}
    ctx: FaultContext
    target: str
    params: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)     # what was resolved, recorded with fault-start

    def prepare(self) -> None:
        """Work that must not fall inside the fault's recorded start: resolving what it will act
        on, making what it needs (an nft table). The runner calls it before it takes the start
        time; a fault's inject calls it too when nobody did (idempotent)."""

    def inject(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        """Undo the fault; a no-op when nothing is left to undo."""

    def finished(self) -> bool:
        """A fault that ends by itself (a shard migration) says so here; the runner heals it then."""
        return False

    @classmethod
    def params_problem(cls, params: dict) -> str | None:
        """Why `params` (types and defaults already checked) cannot mean what the kind promises,
        or None: ranges beyond `>= 0` that a kind needs (a zero CPU quota is no quota at all)."""
        return None
