"""disk-full: the shard copy's data volume filled to the last byte; its checkpoint writes hit
ENOSPC. What it had must survive whole: checkpoints are written aside and renamed, so a failed
write leaves the previous one in force. Heals by freeing the space.

The fault brings its own evidence, and fails closed without it (the heal raises, the runner
records it, the run is unknown with the reason):
- the volume really is full once filled (statvfs: no block left for the node), or nothing was
  tested;
- the target attempted a write that hit ENOSPC while the disk was full: a `checkpoint-error`
  event with "No space left" in its event file inside the fault window. An unchanged checkpoint
  alone proves nothing: the node skips its periodic write while its seq did not move, and a
  fault shorter than the checkpoint interval may see no write at all. The heal waits up to one
  checkpoint interval (plus 1 s) for that event before it gives up;
- the local checkpoint in force when the disk filled is still in force and loadable."""
from __future__ import annotations

import json
import os
import threading

from pschaos.harness.checkers.scan import scan_folder
from pschaos.harness.errors import HarnessError
from pschaos.harness.faults.container import ContainerFault

ENOSPC_TEXT = ("No space left", "ENOSPC", "[Errno 28]")


class DiskFull(ContainerFault):
    kind = "disk-full"

    def act(self, be) -> None:
        if not self.target.startswith("shard-"):
            raise HarnessError(f"disk-full {self.target}: only shard copies keep data; target a copy, "
                               "e.g. primary(shard=0)")
        self.started = self.ctx.clock.now()
        self.info["filled_bytes"] = be.fill_disk(self.target)
        free = os.statvfs(be.data_path(self.target)).f_bavail
        if free:
            raise HarnessError(f"disk-full {self.target}: the data volume still has {free} free block(s) after "
                               "filling it: the node's writes would not hit ENOSPC")
        self.info["checkpoint_before"] = self._in_force(be)
        # a write that fails removes its partial file, freeing space the next write might fit in:
        # keep the disk topped up while the fault lasts
        self.full = threading.Event()
        self.keeper = self.ctx.clock.spawn(self._keep_full, "disk-full")

    def _keep_full(self) -> None:
        be = self.ctx.backend
        while not self.ctx.clock.wait_until(self.full.is_set, 0.02, 0.02):
            self.info["filled_bytes"] += be.fill_disk(self.target)

    def undo(self, be) -> None:
        keeper = getattr(self, "keeper", None)
        enospc: list[dict] = []
        if keeper is not None:          # the disk was full: wait (bounded) for a write to hit it
            spec = getattr(be, "spec", None)
            wait = float(getattr(spec, "checkpoint_interval_s", 2.0)) + 1.0

            def hit() -> bool:
                enospc[:] = self._enospc_errors(be)
                return bool(enospc)
            self.ctx.clock.wait_until(hit, wait, 0.05)
            self.full.set()
            self.ctx.clock.join(keeper, 5)
        self.info["enospc_errors"] = len(enospc)
        after = self._in_force(be)
        be.free_disk(self.target)
        before = self.info.get("checkpoint_before")
        self.info["checkpoint_after"] = after
        if keeper is None:
            return                      # the fill itself failed: that error is the run's reason
        if not enospc:
            raise HarnessError(f"disk-full {self.target}: no checkpoint write hit ENOSPC while the disk was full "
                               "(no checkpoint-error 'No space left' in its event file): nothing shows a write was "
                               "attempted; keep the disk full longer than checkpoint_interval_s while it trains "
                               "(duration_s)")
        if before is None:
            raise HarnessError(f"disk-full {self.target}: the copy had no local checkpoint when its disk filled, "
                               "so nothing shows it kept what it had; fill it later (at a later step)")
        if after != before:
            raise HarnessError(f"disk-full {self.target}: the checkpoint in force changed while the disk was full "
                               f"({before} -> {after}): a write did not hit ENOSPC, or it left a torn checkpoint")

    def _enospc_errors(self, be) -> list[dict]:
        """The target's `checkpoint-error` events that name ENOSPC since the disk filled."""
        try:
            lines = be.events_path(self.target).read_text().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                ev = json.loads(line)
            except ValueError:
                continue                # a line being written
            if (ev.get("f") == "checkpoint-error" and ev.get("t", 0) >= self.started
                    and any(s in str(ev.get("value", {}).get("error", "")) for s in ENOSPC_TEXT)):
                out.append(ev)
        return out

    def _in_force(self, be) -> dict | None:
        """The local checkpoint's manifest seq and file, and whether it loads; None when none."""
        from pschaos.psnodes.store.checkpoint import MANIFEST

        d = be.data_path(self.target)
        man = d / MANIFEST
        if not man.exists():
            return None
        v = scan_folder(".", d)
        return {k: v.get(k) for k in ("seq", "file", "loadable")}
