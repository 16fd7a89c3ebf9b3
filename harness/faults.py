"""Process faults: each a small class that knows how to inject itself and how to heal.

Like a Toxiproxy toxic, a fault is one method pair behind a registry by name; the runner keeps
the timing and records start and stop in the history, and heals every open fault at the end.
"""
from __future__ import annotations


class Fault:
    kind = ""

    def __init__(self, backend, target: str) -> None:
        self.backend, self.target = backend, target

    def inject(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        """Undo the fault; a no-op when nothing is left to undo."""


class Kill(Fault):
    """SIGKILL: a crash. Healing starts the process again (same name, address and data folder)."""

    kind = "kill"

    def inject(self) -> None:
        self.backend.kill(self.target)

    def heal(self) -> None:
        self.backend.restart(self.target)


class Stop(Fault):
    """SIGTERM: a graceful stop (the node checkpoints locally). Healing starts it again."""

    kind = "stop"

    def inject(self) -> None:
        self.backend.stop(self.target)

    def heal(self) -> None:
        self.backend.restart(self.target)


class Restart(Fault):
    """Stop and start at once; nothing to heal."""

    kind = "restart"

    def inject(self) -> None:
        self.backend.stop(self.target)
        self.backend.restart(self.target)


class Pause(Fault):
    """SIGSTOP: a long GC pause or a frozen VM. Healing sends SIGCONT."""

    kind = "pause"

    def inject(self) -> None:
        self.backend.pause(self.target)

    def heal(self) -> None:
        self.backend.resume(self.target)


FAULTS: dict[str, type[Fault]] = {c.kind: c for c in (Kill, Stop, Restart, Pause)}
