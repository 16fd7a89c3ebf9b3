"""cpu-throttle: a CPU quota on a running container, the straggler. Heals by lifting it."""
from __future__ import annotations

from .container import ContainerFault


class CpuThrottle(ContainerFault):
    """`cpus`: how many CPUs' worth of time the container may use (0.1: a tenth of one CPU)."""

    kind = "cpu-throttle"
    params_spec = {"cpus": (float, 0.1)}

    def act(self, be) -> None:
        be.limit_cpu(self.target, self.params["cpus"])
        self.info["cpus"] = self.params["cpus"]

    def undo(self, be) -> None:
        be.limit_cpu(self.target, None)
