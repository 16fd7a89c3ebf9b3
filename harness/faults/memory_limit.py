"""memory-limit: a memory limit the node runs into, and the kernel's OOM killer takes it.

The limit is set `headroom_mb` above what the container uses, then memory pressure inside it
reaches the limit; the engine reports the kill (`OOMKilled`), recorded with the fault as `reason`.
Healing lifts the limit and starts the container again, as a kill's heal does.
"""
from __future__ import annotations

from .container import ContainerFault


class MemoryLimit(ContainerFault):
    kind = "memory-limit"
    params_spec = {"headroom_mb": (int, 16)}

    def act(self, be) -> None:
        self.info.update(be.oom_kill(self.target, self.params["headroom_mb"]))

    def undo(self, be) -> None:
        be.unlimit_memory(self.target)
        be.restart(self.target)
