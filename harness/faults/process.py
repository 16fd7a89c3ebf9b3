"""Process faults: kill (SIGKILL), stop (SIGTERM), restart, pause (SIGSTOP/SIGCONT)."""
from __future__ import annotations

from pathlib import Path

from pschaos.netfaults.faults.base import check_params
from pschaos.psnodes.store.checkpoint import MANIFEST

from pschaos.harness.errors import HarnessError

from pschaos.harness.faults.base import Fault
from pschaos.harness.faults.moments import MIGRATION_MOMENTS, MOMENTS, await_migration, kill_mid_catchup, kill_mid_promotion


class Kill(Fault):
    """SIGKILL, a crash. `during` times it against a protocol moment (moments.py), each step
    looked for up to `wait_s` (10 s): `checkpoint` kills the node mid-write of a checkpoint's
    data file, and scans the checkpoints as the kill left them; `catch-up` (a replica target)
    kills it until it leaves the ISR, starts it, and kills its primary while it catches it up;
    `promotion` kills the target's shard primary and then the successor, the moment etcd names it.
    `wipe: true` also deletes the local data (a lost disk). Healing starts every copy it killed
    again with the same name, address and data folder. A timed kill records when its last kill
    landed (`in_place_after_s` into the inject): its duration counts from then, not from when it
    came due, since the wait for the moment can take seconds; a catch-up copy seen back in the
    ISR before its first answer is killed and started again, up to three tries. `after_s` (up to
    60) delays a plain kill by that many seconds from when it came due: a step trigger fires as a
    step starts, and a kill meant for the middle of that step (after its update landed) waits for
    it; the checks time the fault from when it landed."""

    kind = "kill"
    params_spec = {"during": (str, ""), "wipe": (bool, False), "wait_s": (float, 10.0), "after_s": (float, 0.0)}

    @classmethod
    def params_problem(cls, params: dict) -> str | None:
        if params["during"] and params["during"] not in MOMENTS + MIGRATION_MOMENTS:
            return (f"kill: params.during={params['during']!r} is not a moment; use one of "
                    f"{', '.join(MOMENTS + MIGRATION_MOMENTS)} (or leave it out for a kill at the scheduled time)")
        if params["wait_s"] <= 0:
            return "kill: params.wait_s must be > 0 (seconds to wait for the moment)"
        if params["wait_s"] != 10.0 and not params["during"]:
            return "kill: params.wait_s times a wait for a moment; give params.during too, or leave wait_s out"
        if not 0 <= params["after_s"] <= 60:
            return "kill: params.after_s must be between 0 and 60 (seconds from when the kill came due; the run waits)"
        if params["after_s"] and params["during"]:
            return "kill: params.after_s delays a plain kill; a kill with params.during waits for its moment instead"
        if params["wipe"] and params["during"] in ("catch-up", "promotion"):
            return f"kill: params.wipe cannot go with during: {params['during']}; wipe a plain kill instead"
        return None

    def inject(self) -> None:
        be = self.ctx.backend
        during = self.params.get("during")
        t0 = self.ctx.clock.monotonic()
        if during in ("catch-up", "promotion"):
            timed = kill_mid_catchup if during == "catch-up" else kill_mid_promotion
            try:
                timed(self.ctx, self.target, self.params.get("wait_s", 10.0), self.info)
            finally:
                self.target = self.info.get("target", self.target)
            self.info["in_place_after_s"] = round(self.ctx.clock.monotonic() - t0, 3)
            # what it left dead (mid-catch-up the replica it killed first runs again by design, and
            # nothing else is dead when the moment was missed after the restart: evidence says so)
            for v in self.info.get("down", []):
                if be.alive(v):
                    raise HarnessError(f"kill {v}: still alive after SIGKILL")
            return
        if during == "checkpoint":
            self.info["caught_writing"] = self._await_checkpoint_write(be, self.params.get("wait_s", 10.0))
        if during in MIGRATION_MOMENTS:
            self.info["caught_migrating"] = await_migration(self.ctx, during, self.params.get("wait_s", 10.0))
        if self.params.get("after_s"):
            self.ctx.clock.sleep(self.params["after_s"])
        be.kill(self.target)
        if during or self.params.get("after_s"):
            self.info["in_place_after_s"] = round(self.ctx.clock.monotonic() - t0, 3)
        # a supervised job's role may already run again (its restart): its kill() checked the pid it killed
        if not getattr(be, "supervised", False) and be.alive(self.target):
            raise HarnessError(f"kill {self.target}: still alive after SIGKILL")
        self._primary_when_killed(be)
        caught = self.info.get("caught_writing")
        if caught and caught not in be.checkpoint_writes(self.target):
            # renamed into place (or swept) before the kill landed: it was not killed mid-write
            self.info.update(caught_writing=None, missed_write=caught)
        if during == "checkpoint":
            # judged now, as the kill left them: the copy's restart writes a new checkpoint over a
            # torn one long before the end-of-run scan (checkpoints-atomic reads every scan)
            for v in be.checkpoint_scan():
                self.ctx.record("checkpoint-scan", {**v, "after_kill": self.target})
        if self.params.get("wipe") and self.target.startswith("shard-"):
            be.wipe_data(self.target)
            self.info["wiped"] = True

    epoch_before: int | None = None     # the shard's epoch as the runner read it before the inject

    def _primary_when_killed(self, be, dead: list[str] | None = None) -> None:
        """The shard record as the kill left it, when it names a copy the kill took (`dead`,
        default the target) primary at an epoch above the one read before the inject: a copy
        killed between winning its epoch in etcd and writing its promote event leaves a term with
        no event, and this record is its evidence (`primary_when_killed` {epoch, node}, judged
        like a kill timed to a promotion: checkers/spurious.py). A term won before the fault came
        is not claimed (its missing event stays a gap); nor anything when etcd is down or no
        epoch was read before."""
        dead = dead or [self.target]
        if not self.target.startswith("shard-") or self.epoch_before is None:
            return
        try:
            rec = be.routing().get(int(self.target.split("-")[1].split("/")[0]))
        except Exception:  # noqa: BLE001 - no record read is no evidence claimed
            return
        if rec is not None and rec.primary in dead and rec.epoch > self.epoch_before:
            self.info["primary_when_killed"] = {"epoch": rec.epoch, "node": rec.primary}

    def _await_checkpoint_write(self, be, timeout: float = 10.0) -> str | None:
        seen: list[str] = []

        def writing() -> bool:
            # the data file's temporary, not the manifest's: the manifest is small and renamed at once,
            # so a kill aimed at it lands before the commit, never in the window between the two files
            seen[:] = [w for w in be.checkpoint_writes(self.target)
                       if not Path(w).name.startswith(MANIFEST + ".")][:1]
            return bool(seen)
        self.ctx.clock.wait_until(writing, timeout, 0.0005)
        return seen[0] if seen else None

    def heal(self) -> None:
        for v in self.info.get("victims", [self.target]):
            self.ctx.backend.restart(v)


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
