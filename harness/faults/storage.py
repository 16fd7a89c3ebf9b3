"""Storage faults: a power cut, a power cut that tears a write, and a bit that rots at rest.

A kill leaves every byte a node wrote in the kernel's page cache, so no kill shows a checkpoint
renamed before it was synced, or a folder never synced after a rename. These cut the power of the
node's disk (the power-loss disk in front of its data folder, pschaos.diskfaults): the node dies
(SIGKILL) and its disk keeps only what it synced; healing starts it again on what is left.

- `power-loss`: what the node never fsynced is gone, file data and directory changes alike.
  `during: checkpoint` cuts it while the node writes a checkpoint's data file (as kill's);
  `during: catch-up` kills a replica, starts it, and cuts it while it catches up;
  `copies: all` cuts every live copy of the target's shard at once (a rack's power): all die
  before any disk is cut, so no copy lives on to win an election between the cuts;
  `sync_of: manifest.json` cuts it the moment it asks its disk to sync a file so named.
- `torn-write`: as power-loss, and one file's last held write lands in part: `file` names it
  (a path in the node's data folder; default: the held write the seed picks; with `sync_of`,
  the file being synced), `keep: pages`
  keeps a whole number of 4 KiB pages of it, `keep: prefix` any number of bytes (both fewer than
  all of it, at least one).
- `bit-rot`: while the node is down, one bit of a file at rest flips (BitRot below).

Each records what the disk lost (`power_loss`: bytes and files dropped, changes undone, the torn
write) and the checkpoints as the cut left them. Fail closed: a disk that does not answer, a
change it could not undo, or a torn-write with no held write to tear is a fault-error, and the
run is unknown with the reason. The process backend mounts the disks for a scenario with
power-loss or torn-write; the twin's disk (backends/sim/disk.py) keeps what each folder synced
and takes power-loss and bit-rot, but tears no write; the docker backend refuses all three when
the scenario loads.
"""
from __future__ import annotations

from pathlib import Path


from pschaos.harness.errors import HarnessError
from pschaos.harness.faults.process import Kill

STORAGE_KINDS = ("power-loss", "torn-write")      # the kinds that need the power-loss disk
NOT_ON_DOCKER = STORAGE_KINDS + ("bit-rot",)      # not on containers' volumes yet: refused when loaded
PAGE = 4096


def storage_kinds_of(scenario, kinds: tuple[str, ...] = STORAGE_KINDS) -> list[str]:
    """The storage kinds (`kinds` of them) a scenario schedules (its faults and its nemesis)."""
    got = [f.kind for f in scenario.faults] + (list(scenario.nemesis.kinds) if scenario.nemesis else [])
    return sorted({k for k in got if k in kinds})


def not_in_the_twin(scenario) -> list[str]:
    """The storage faults a scenario schedules that the twin's disk cannot take: a torn write (it
    writes no partial data) and a cut at a file's sync (it writes a manifest at one instant)."""
    got = [(f.kind, f.params or {}) for f in scenario.faults]
    nem = scenario.nemesis
    for k in (nem.kinds if nem else []):
        ps = (nem.params or {}).get(k, {})
        got += [(k, p) for p in ([ps] if isinstance(ps, dict) else ps)] or [(k, {})]
    return sorted({"torn-write" if k == "torn-write" else f"{k} (sync_of)" for k, ps in got
                   if k == "torn-write" or (k in STORAGE_KINDS and ps.get("sync_of"))})


def refuse_unless(fault: Kill, be, method: str, why: str, where: str) -> None:
    """A storage fault on a backend without the means, or on a target that keeps no data, is
    refused by name (a fault-error: the run is unknown with the reason)."""
    if not hasattr(be, method):
        raise HarnessError(f"fault kind {fault.kind!r} {why}, which the {be.name} backend does not do; run the "
                           f"scenario with {where}")
    if not fault.target.startswith("shard-"):
        raise HarnessError(f"{fault.kind} {fault.target}: only shard copies keep data on a disk; target a copy, "
                           "e.g. primary(shard=0)")


class PowerLoss(Kill):
    """The copy dies (SIGKILL) and its disk loses what the copy never fsynced: file data and
    directory changes alike, as after a power cut; healing starts it again on what is left.
    `during: checkpoint` cuts it while the copy writes a checkpoint's data file; `during:
    catch-up` cuts a replica while it catches up. `copies: all` cuts every live copy of the
    target's shard at once: each dies before any disk is cut, so none lives on to win an
    election between the cuts. `sync_of: NAME` cuts it the moment it asks its disk to sync a
    file whose name starts with NAME (a manifest's write in flight; the process backend only).
    The process backend (the power-loss disk in front of each copy's data folder) and the
    simulator."""

    kind = "power-loss"
    params_spec = {"during": (str, ""), "wait_s": (float, 10.0), "after_s": (float, 0.0), "copies": (str, "one"),
                   "sync_of": (str, "")}

    @classmethod
    def params_problem(cls, params: dict) -> str | None:
        if params["sync_of"] and ("/" in params["sync_of"] or params["during"] or params["copies"] != "one"
                                  or params["after_s"]):
            return (f"{cls.kind}: params.sync_of={params['sync_of']!r} times the cut itself (the moment the copy "
                    "asks to sync a file whose name starts with it, e.g. manifest.json): give a file name (no '/') "
                    "and no during, after_s or copies: all with it")
        if params["copies"] not in ("one", "all"):
            return (f"{cls.kind}: params.copies={params['copies']!r}: cut the target copy alone (one, the default) "
                    "or every live copy of its shard at once (all)")
        if params["copies"] == "all" and params["during"] == "catch-up":
            return (f"{cls.kind}: params.copies=all cannot go with during: catch-up (the replica catches up from "
                    "a copy the cut would take too); cut one copy during catch-up, or all copies at a time")
        if params["during"] not in ("", "checkpoint", "catch-up") or (cls.kind != "power-loss" and params["during"]
                                                                     == "catch-up"):
            return (f"{cls.kind}: params.during={params['during']!r}: a power cut is timed to a checkpoint "
                    "write (during: checkpoint), to a replica's catch-up (during: catch-up, power-loss only) or "
                    "comes when scheduled (leave it out)")
        rest = {k: v for k, v in {**params, "wipe": False}.items() if k not in ("copies", "sync_of")}
        if params["sync_of"] and params["wait_s"] > 0:
            rest["wait_s"] = 10.0        # it times the wait for the sync, as during's for its moment
        return super().params_problem(rest)

    def inject(self) -> None:
        be = self.ctx.backend
        refuse_unless(self, be, "power_loss", "needs the power-loss disk", "--backend process")
        at_sync, sync_of, everyone = None, self.params.get("sync_of"), self.params.get("copies") == "all"
        if sync_of:
            at_sync = self._cut_at_sync(be)        # killed by its disk, or here when the moment never came
        elif self.params.get("during") == "catch-up":
            self._kill_while_catching_up(be)
        elif everyone:
            self._kill_every_copy(be)
        else:
            super().inject()             # SIGKILL (timed to a checkpoint write when asked), checked dead
        loss = at_sync if at_sync is not None else self._cut(be, self.target, None if sync_of else self._torn(be))
        self.info["power_loss"] = _summary(loss)
        if everyone:
            self.info["power_loss_others"] = {o: _summary(self._cut(be, o, None)) for o in self.info["cut_too"]}
        caught = self.info.get("caught_writing")
        if caught:                               # the write it was timed to: dropped or undone by the cut
            name = Path(caught).name
            self.info["power_loss"]["cut_caught_write"] = any(name in str(x) for x in
                                                              [*(loss.get("dropped_files") or {}), *(loss.get("undone") or [])])
        torn = loss.get("torn")
        if torn is not None and not torn.get("torn") and not (at_sync is not None and torn.get("removed")):
            raise HarnessError(f"torn-write {self.target}: nothing was torn: {torn.get('why')}; the fault did not fire")
        for v in be.checkpoint_scan():           # as the cut left them, before the restart writes anew
            self.ctx.record("checkpoint-scan", {**v, "after_power_loss": self.target})

    def _cut_at_sync(self, be) -> dict | None:
        """`sync_of`: the copy's disk cuts its power the moment the copy asks it to sync a file so
        named, killing the copy first (diskfaults/tear.py); what the cut took, or None when no such
        sync came within `wait_s` (the copy is then killed and cut here, and `caught_syncing`
        None says the moment was missed: scenario-ran is unknown). A torn-write tears that file's
        last write, by the seed's draw; a tear whose file the cut removed (a write-aside never
        renamed) landed nowhere, which is the point of writing aside."""
        refuse_unless(self, be, "arm_sync_cut", "needs the power-loss disk's sync trap", "--backend process")
        keep = self.params.get("keep") if self.kind == "torn-write" else None
        r = self.ctx.rng.random()
        be.arm_sync_cut(self.target, self.kind, self.params["sync_of"], keep, r)
        self.info["caught_syncing"] = None
        # polled, not timed: the disk kills the copy itself when the trap fires, so 10 ms only delays
        # the harness noticing (each poll is a connection to the disk server, 2 ms cost CPU the run needs)
        self.ctx.clock.wait_until(lambda: be.sync_cut_fired(self.target), self.params.get("wait_s", 10.0), 0.01)
        fired = be.disarm_sync_cut(self.target, self.kind)    # what it cut, if it fired meanwhile
        be.kill(self.target)             # dead already when it fired (its disk killed it): then a no-op
        if be.alive(self.target):
            raise HarnessError(f"{self.kind} {self.target}: still alive after SIGKILL")
        self._primary_when_killed(be)
        if fired is None:
            return None
        be.power_on(self.target, self.kind)
        self.info["caught_syncing"] = fired.get("path")
        return fired

    def _cut(self, be, name: str, torn: dict | None) -> dict:
        """Cut `name`'s disk (dead by now); a change the disk could not undo fails the fault."""
        loss = be.power_loss(name, torn)
        if loss.get("undo_errors"):
            raise HarnessError(f"{self.kind} {name}: the disk could not undo {loss['undo_errors'][:3]}: "
                               "it does not hold what a disk would after a power cut")
        return loss

    def _kill_every_copy(self, be) -> None:
        """`copies: all`: SIGKILL every live copy of the target's shard, the target first (timed to
        its checkpoint write when asked), one right after another, and only then check them
        dead and read the shard record: no copy lives on to win an election between two kills.
        They are victims (healing starts them again). A copy already down (another fault's, which
        starts it again) has its disk cut too, as a rack's power would (`cut_too`)."""
        shard = int(self.target.split("-")[1].split("/")[0])
        if self.params.get("during") == "checkpoint":
            self.info["caught_writing"] = self._await_checkpoint_write(be, self.params.get("wait_s", 10.0))
        if self.params.get("after_s"):
            self.ctx.clock.sleep(self.params["after_s"])
        copies = be.shard_nodes(shard)
        victims = [self.target] + [n for n in copies if n != self.target and be.alive(n)]
        down = [n for n in copies if n not in victims]
        self.info.update(victims=victims, down=list(victims), already_down=down, cut_too=victims[1:] + down)
        for n in victims:                        # listed before: a heal after a failure midway restarts them
            be.kill(n)
        for n in victims:
            if be.alive(n):
                raise HarnessError(f"{self.kind} {n}: still alive after SIGKILL")
        self._primary_when_killed(be, victims)

    def heal(self) -> None:
        """A sync trap a failed inject left armed is taken back, and a disk it left off is powered
        on (its copy killed first if it still runs) before any copy starts again on it."""
        be = self.ctx.backend
        if self.params.get("sync_of") and hasattr(be, "disarm_sync_cut"):
            be.disarm_sync_cut(self.target, self.kind)
            if be.disk_off(self.target):
                if be.alive(self.target):
                    be.kill(self.target)
                be.power_on(self.target, self.kind)
        super().heal()

    def _kill_while_catching_up(self, be) -> None:
        """`during: catch-up`: kill the replica, start it again once its primary dropped it from the
        ISR, and kill it the moment it answers while still outside the ISR (moments.py's wait, as
        kill's): its power then goes mid-recovery, and it starts again on what its disk kept. A
        moment missed is recorded (`caught_catching_up` None: scenario-ran says so)."""
        from pschaos.harness.faults.moments import CATCHUP_ATTEMPTS, _catch_once, shard_of

        shard = shard_of(self.target)
        rec = be.routing().get(shard)
        if rec is None or rec.primary == self.target:
            raise HarnessError(f"power-loss {self.target} during catch-up: name a replica (e.g. replica(shard=0))")
        self.info.update(copy=self.target, shard=shard, epoch=rec.epoch, was_primary=False, victims=[self.target],
                         down=[self.target], caught_catching_up=None, attempts=0)
        seen = None
        for attempt in range(1, CATCHUP_ATTEMPTS + 1):
            self.info["attempts"] = attempt
            seen = _catch_once(self.ctx, self.target, shard, rec.primary, rec.epoch, self.params.get("wait_s", 10.0),
                               self.info)
            if seen is None or seen:
                break
        be.kill(self.target)
        if be.alive(self.target):
            raise HarnessError(f"power-loss {self.target}: still alive after SIGKILL")
        self.info["caught_catching_up"] = seen or None

    def _await_checkpoint_write(self, be, timeout: float = 10.0) -> str | None:
        """Kill's wait, for a write into the copy's own data folder only: the shard's shared folder
        is not on the copy's disk, and a cut caught there would hit no write the disk holds."""
        own = f"data/{self.target.replace('/', '-')}/"
        seen: list[str] = []

        def writing() -> bool:
            seen[:] = [w for w in be.checkpoint_writes(self.target) if own in str(w).replace("\\", "/")
                       and Path(w).name.startswith("state-")][:1]      # a checkpoint's data, not verified.json's
            return bool(seen)
        self.ctx.clock.wait_until(writing, timeout, 0.0005)
        return seen[0] if seen else None

    def _torn(self, be) -> dict | None:
        return None


def _summary(loss: dict) -> dict:
    """What one cut took, as the fault-start records it (lists cut to 20)."""
    return {"dropped_bytes": loss.get("dropped_bytes", 0), "dropped_files": sorted(loss.get("dropped_files") or {})[:20],
            "undone": (loss.get("undone") or [])[:20], "undone_count": len(loss.get("undone") or []),
            "torn": loss.get("torn")}


class TornWrite(PowerLoss):
    """A power cut that tears a write: as power-loss, and one file's last held write lands in
    part. `file` names it (default: the held write the seed picks), `keep: pages` keeps a whole
    number of 4 KiB pages counted from the write's start (a write of one page or less: a
    prefix), `keep: prefix` any number of bytes, always fewer than all. A file whose entry the cut
    removes keeps no tear: the fault did not fire (unknown). With `sync_of`, the write torn is
    the last one of the file whose sync the cut caught, and a tear of a file the cut removed (a
    write-aside never renamed) landed nowhere, as writing aside intends. The process backend only."""

    kind = "torn-write"
    params_spec = {**PowerLoss.params_spec, "file": (str, ""), "keep": (str, "pages")}

    @classmethod
    def params_problem(cls, params: dict) -> str | None:
        if params["file"] and params["sync_of"]:
            return ("torn-write: params.file and params.sync_of both name the write to tear; give one (sync_of tears "
                    "the file whose sync the cut catches)")
        if params["keep"] not in ("pages", "prefix"):
            return f"torn-write: params.keep={params['keep']!r}: keep whole 4 KiB pages (pages) or any prefix (prefix)"
        return super().params_problem({k: v for k, v in params.items() if k not in ("file", "keep")})

    def _torn(self, be) -> dict:
        held = be.held_writes(self.target)
        want = self.params.get("file", "")
        if want:
            if want not in held:
                raise HarnessError(f"torn-write {self.target}: no write to {want} was held when the power went "
                                   f"(held: {sorted(held) or 'none'}); the fault did not fire")
            path = want
        else:
            if not held:
                raise HarnessError(f"torn-write {self.target}: no write was held when the power went: nothing "
                                   "to tear; time it to a checkpoint write (during: checkpoint)")
            path = self.ctx.rng.choice(sorted(held))
        size = int(held[path])
        if self.params.get("keep", "pages") == "pages" and size > PAGE:
            keep = PAGE * self.ctx.rng.randint(1, (size - 1) // PAGE)
        elif size > 1:
            keep = self.ctx.rng.randint(1, size - 1)
        else:
            raise HarnessError(f"torn-write {self.target}: the last held write to {path} is {size} byte(s): "
                               "too small to tear")
        self.info["torn_target"] = {"path": path, "write_bytes": size, "keep_bytes": keep}
        return {"path": path, "keep_bytes": keep}


class BitRot(Kill):
    """While the copy is down, one bit of a file at rest flips: the state file its newest local
    checkpoint's manifest names, or `file` (a path in its data folder); the seed picks the byte and
    the bit. Healing starts the copy again: it must see the damage (the bytes' CRC-32 is not the
    manifest's; a rotted manifest.json fails its own seal or does not parse), say so in a
    checkpoint-error and start without that checkpoint. The process
    backend (with or without the power-loss disk) and the simulator; the docker backend refuses it
    when the scenario loads."""

    kind = "bit-rot"
    params_spec = {"file": (str, "")}

    @classmethod
    def params_problem(cls, params: dict) -> str | None:
        f = params["file"]
        if f.startswith("/") or ".." in Path(f).parts:
            return f"bit-rot: params.file={f!r} must be a path inside the copy's data folder (relative, no '..')"
        return None

    def inject(self) -> None:
        be = self.ctx.backend
        refuse_unless(self, be, "rot", "cannot rot a file at rest", "--backend process or --backend sim")
        be.kill(self.target)
        if be.alive(self.target):
            raise HarnessError(f"bit-rot {self.target}: still alive after SIGKILL")
        rng = self.ctx.rng
        rot = be.rot(self.target, self.params.get("file", ""), lambda size: (rng.randrange(size), rng.randrange(8)))
        self.info["rotted"] = {**rot, "manifest_file": not self.params.get("file")}
