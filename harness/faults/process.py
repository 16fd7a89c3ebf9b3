"""Process faults: kill (SIGKILL), stop (SIGTERM), restart, pause (SIGSTOP/SIGCONT)."""
from __future__ import annotations

from netfaults.faults.base import check_params

from ..errors import HarnessError

from .base import Fault


class Kill(Fault):
    """SIGKILL, a crash. `during: checkpoint` waits (up to 10 s) until the node is writing a
    checkpoint file, to kill it mid-write; `wipe: true` also deletes its local data (a lost disk).
    Healing starts it again with the same name, address and data folder."""

    kind = "kill"
    params_spec = {"during": (str, ""), "wipe": (bool, False)}

    def inject(self) -> None:
        be = self.ctx.backend
        if self.params.get("during") == "checkpoint":
            self.info["caught_writing"] = self._await_checkpoint_write(be)
        be.kill(self.target)
        if be.alive(self.target):
            raise HarnessError(f"kill {self.target}: still alive after SIGKILL")
        caught = self.info.get("caught_writing")
        if caught and caught not in be.checkpoint_writes(self.target):
            # renamed into place (or swept) before the kill landed: it was not killed mid-write
            self.info.update(caught_writing=None, missed_write=caught)
        if self.params.get("wipe") and self.target.startswith("shard-"):
            be.wipe_data(self.target)
            self.info["wiped"] = True

    def _await_checkpoint_write(self, be, timeout: float = 10.0) -> str | None:
        seen: list[str] = []

        def writing() -> bool:
            seen[:] = be.checkpoint_writes(self.target)[:1]
            return bool(seen)
        self.ctx.clock.wait_until(writing, timeout, 0.0005)
        return seen[0] if seen else None

    def heal(self) -> None:
        self.ctx.backend.restart(self.target)


STOP_TIMEOUT_S = 5.0        # the backends' default grace before SIGKILL


class Stop(Fault):
    """SIGTERM, a graceful stop (the node checkpoints locally first), SIGKILL after `timeout_s`.
    Healing starts it again. On docker the engine takes whole seconds (`docker stop -t`): the
    timeout is rounded, and at least 1 s. A backend whose stop takes no timeout (the simulator)
    refuses any but the default by name, rather than ignore it (`stop_within` is beside the
    Backend protocol)."""

    kind = "stop"
    params_spec = {"timeout_s": (float, STOP_TIMEOUT_S)}

    def inject(self) -> None:
        be, t = self.ctx.backend, self.params["timeout_s"]
        if t == STOP_TIMEOUT_S:
            be.stop(self.target)
            return
        stop_within = getattr(be, "stop_within", None)
        if stop_within is None:
            raise HarnessError(f"stop {self.target}: params.timeout_s={t}: the {getattr(be, 'name', '?')} backend's "
                               f"stop takes no timeout; leave timeout_s out (default {STOP_TIMEOUT_S})")
        stop_within(self.target, t)

    def heal(self) -> None:
        self.ctx.backend.restart(self.target)


class Restart(Fault):
    """Stop and start at once; nothing is left to heal."""

    kind = "restart"

    def inject(self) -> None:
        self.ctx.backend.stop(self.target)
        self.ctx.backend.restart(self.target)


class Pause(Fault):
    """SIGSTOP: a long GC pause or a frozen VM. Healing sends SIGCONT."""

    kind = "pause"

    def inject(self) -> None:
        self.ctx.backend.pause(self.target)

    def heal(self) -> None:
        self.ctx.backend.resume(self.target)


def checked(cls: type[Fault], params: dict) -> dict:
    return check_params(cls.kind, cls.params_spec, params)
