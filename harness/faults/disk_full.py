"""disk-full: the shard copy's data volume filled to the last byte; its checkpoint writes hit
ENOSPC. What it had must survive whole: checkpoints are written aside and renamed, so a failed
write leaves the previous one in force. Heals by freeing the space.

The fault brings its own evidence: the local checkpoint in force when the disk filled must still
be in force and loadable at the heal (none was written while full: the writes did hit ENOSPC, and
none left a torn file). Otherwise the heal raises, the runner records it, and the run is unknown."""
from __future__ import annotations

import threading

from ..backend_common import scan_entry
from ..errors import HarnessError
from .container import ContainerFault


class DiskFull(ContainerFault):
    kind = "disk-full"

    def act(self, be) -> None:
        if not self.target.startswith("shard-"):
            raise HarnessError(f"disk-full {self.target}: only shard copies keep data; target a copy, "
                               "e.g. primary(shard=0)")
        self.info["filled_bytes"] = be.fill_disk(self.target)
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
        if keeper is not None:
            self.full.set()
            self.ctx.clock.join(keeper, 5)
        after = self._in_force(be)
        be.free_disk(self.target)
        before = self.info.get("checkpoint_before")
        self.info["checkpoint_after"] = after
        if before is None:
            raise HarnessError(f"disk-full {self.target}: the copy had no local checkpoint when its disk filled, "
                               "so nothing shows it kept what it had; fill it later (at a later step)")
        if after != before:
            raise HarnessError(f"disk-full {self.target}: the checkpoint in force changed while the disk was full "
                               f"({before} -> {after}): a write did not hit ENOSPC, or it left a torn checkpoint")

    def _in_force(self, be) -> dict | None:
        """The local checkpoint's manifest seq and file, and whether it loads; None when none."""
        from psnodes.checkpoint import MANIFEST

        d = be.data_path(self.target)
        man = d / MANIFEST
        if not man.exists():
            return None
        v = scan_entry(".", [], man.read_text(), lambda name: (d / name).read_bytes())
        return {k: v.get(k) for k in ("seq", "file", "loadable")}
