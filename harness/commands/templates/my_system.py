"""An adapter skeleton: how pschaos starts your system, finds its leader and reads what survived.

Fill in each method (pschaos.harness.backends.adapters.api.Adapter documents the whole contract;
pschaos.harness.backends.adapters.redis_sentinel is a complete one). The scenario
scenarios/my-system-kill-leader.yaml names this class as `system: my_system:MySystem`.
"""
from __future__ import annotations

from pschaos.harness.backends.adapters.api import Adapter, Client


class MySystem(Adapter):
    """Your system: data nodes shard-0/0 .. shard-0/<copies-1>, one group."""

    name = "my-system"
    checks = ("no-lost-updates", "counters-match")

    def configure(self) -> None:
        """Write config files and draw ports: self.ports = self.env.ports(self.env.copies)."""
        raise NotImplementedError("my_system.py: write MySystem.configure (see its docstring)")

    def commands(self) -> dict[str, list[str]]:
        """Each process's command line by node name: {"shard-0/0": ["my-server", "--port", ...], ...}."""
        raise NotImplementedError("my_system.py: write MySystem.commands")

    def ready(self) -> bool:
        """True once the system serves (a leader elected, clients accepted)."""
        raise NotImplementedError("my_system.py: write MySystem.ready")

    def primary(self, group: int = 0) -> str | None:
        """The node that leads now, as its own control plane says (e.g. "shard-0/1"), or None."""
        raise NotImplementedError("my_system.py: write MySystem.primary")

    def client(self, worker: str) -> Client:
        """An object with update(key, op, amount) -> acknowledging node, read(key) and close()."""
        raise NotImplementedError("my_system.py: write MySystem.client")

    def final(self, keys: list[str]) -> tuple[str, dict[str, dict]]:
        """What survived: (node read, {key: {"ops": [...], "count": n, "sum": s}})."""
        raise NotImplementedError("my_system.py: write MySystem.final")
