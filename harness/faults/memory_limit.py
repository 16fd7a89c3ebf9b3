"""memory-limit: a memory limit the node runs into, and the kernel's OOM killer takes it.

The limit is set `headroom_mb` above what the container uses, then memory pressure inside it
reaches the limit; the engine reports the kill (`OOMKilled`), recorded with the fault as `reason`.
Healing lifts the limit and starts the container again, as a kill's heal does.
"""
from __future__ import annotations

import psutil

from pschaos.harness.faults.container import ContainerFault


class MemoryLimit(ContainerFault):
    """`headroom_mb`: how far above the container's use the limit is set (at least 1; the hog
    allocates about twice that, so it must fit the machine's memory with room to spare)."""

    kind = "memory-limit"
    params_spec = {"headroom_mb": (int, 16)}

    @classmethod
    def params_problem(cls, params: dict) -> str | None:
        mb, total = params["headroom_mb"], psutil.virtual_memory().total >> 20
        if not 1 <= mb <= total // 4:
            return (f"memory-limit: params.headroom_mb={mb} must be between 1 and {total // 4} (a quarter of this "
                    f"machine's {total} MiB: the pressure inside the container allocates about twice the headroom); "
                    "e.g. headroom_mb: 16")
        return None

    def act(self, be) -> None:
        self.info.update(be.oom_kill(self.target, self.params["headroom_mb"]))

    def undo(self, be) -> None:
        be.unlimit_memory(self.target)
        be.restart(self.target)
