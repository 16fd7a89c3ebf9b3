"""The shape every harness fault has: inject, heal, and what it records in the history."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar


@dataclass
class FaultContext:
    """What a fault may touch: the backend, the seeded generator, and a way to write history."""

    backend: Any
    rng: random.Random
    record: Callable[[str, dict], dict]
    steps: int = 0
    step_delay: float = 0.0


@dataclass
class Fault:
    kind: ClassVar[str] = ""
    params_spec: ClassVar[dict] = {}
    ctx: FaultContext
    target: str
    params: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)     # what was resolved, recorded with fault-start

    def inject(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        """Undo the fault; a no-op when nothing is left to undo."""
