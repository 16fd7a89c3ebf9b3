"""What the faults only containers have share: the backend must say it can do the kind.

A backend lists the kinds it offers beyond the Backend protocol in `container_kinds`
(harness/backends/docker/backend.py); on any other backend (process, sim) such a fault is refused by name
when it comes due, a HarnessError the runner records as a fault-error, so the run is `unknown`
and says why: fail closed, never skipped, as the simulator refuses what it does not model.
"""
from __future__ import annotations

from typing import Any

from pschaos.harness.errors import HarnessError
from pschaos.harness.faults.base import Fault

CONTAINER_KINDS = ("cpu-throttle", "memory-limit", "disk-full")


def container_kinds_of(scenario: Any) -> list[str]:
    """The container-only kinds a scenario schedules (its faults and its nemesis)."""
    kinds = [f.kind for f in scenario.faults] + (list(scenario.nemesis.kinds) if scenario.nemesis else [])
    return sorted({k for k in kinds if k in CONTAINER_KINDS})


class ContainerFault(Fault):
    """A fault that acts on a container through the engine: subclasses write `act` and `undo`.
    A refused fault has nothing to heal; one that failed half-way is undone all the same."""

    acted = False

    def inject(self) -> None:
        be = self.ctx.backend
        if self.kind not in getattr(be, "container_kinds", ()):
            raise HarnessError(f"fault kind {self.kind!r} needs containers: the {be.name} backend cannot do it; "
                               "run the scenario with --backend docker")
        self.acted = True
        self.act(be)

    def heal(self) -> None:
        if self.acted:
            self.undo(self.ctx.backend)

    def act(self, be: Any) -> None:
        raise NotImplementedError

    def undo(self, be: Any) -> None:
        raise NotImplementedError
