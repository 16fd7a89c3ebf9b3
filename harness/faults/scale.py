"""Scale-out and scale-in of workers while training."""
from __future__ import annotations

from pschaos.harness.faults.base import Fault


class ScaleOut(Fault):
    """Start `count` new workers (worker-N, worker-N+1, ...) that join the training."""

    kind = "scale-out"
    params_spec = {"count": (int, 1)}

    def inject(self) -> None:
        be = self.ctx.backend
        start = len(be.workers())
        added = [f"worker-{start + i}" for i in range(self.params["count"])]
        for w in added:
            be.start_worker(w, self.ctx.steps, step_delay=self.ctx.step_delay)
        self.info["added"] = added


class ScaleIn(Fault):
    """Stop `count` running workers (the newest first), gracefully."""

    kind = "scale-in"
    params_spec = {"count": (int, 1)}

    def inject(self) -> None:
        be = self.ctx.backend
        running = sorted((w for w in be.workers() if be.alive(w)), key=lambda w: int(w.split("-")[1]))
        removed = running[-self.params["count"]:] if self.params["count"] else []
        for w in removed:
            be.stop(w)
        self.info["removed"] = removed
