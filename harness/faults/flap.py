"""Flapping: the target is killed and restarted again and again, re-resolved every time.

`flap` of `primary(shard=0)` kills whoever is primary now, brings it back after `down_s`, waits
`period_s`, and repeats `count` times. Each kill is recorded as its own fault-start/stop, so the
failover checks see every one.
"""
from __future__ import annotations

import random
import threading

from pschaos.harness.faults.targets import resolve
from pschaos.harness.faults.base import Fault


class Flap(Fault):
    kind = "flap"
    params_spec = {"count": (int, 3), "down_s": (float, 1.0), "period_s": (float, 2.0)}

    def inject(self) -> None:
        # its own generator, seeded from the run's in the main thread: the draws stay one seed's
        self.rng = random.Random(self.ctx.rng.random())
        self.stop = threading.Event()        # only polled (clock.wait_until), never waited on
        self.thread = self.ctx.clock.spawn(self._loop, "flap")

    def _loop(self) -> None:
        try:
            self._flap()
        except Exception as e:  # noqa: BLE001 - a crashed flap means the scenario did not run as written
            self._error(f"flap thread crashed: {e.__class__.__name__}: {e}")

    def _error(self, msg: str) -> None:
        try:
            self.ctx.record("fault-error", {"kind": "flap", "target": self.target, "index": self.info.get("index"),
                                            "error": msg})
        except (ValueError, OSError):
            pass      # the history is already closed: the run was interrupted and is being torn down

    def _flap(self) -> None:
        be, p = self.ctx.backend, self.params
        for i in range(p["count"]):
            if self.stop.is_set():
                return
            name = resolve(self.target, be, self.rng)
            info = {"kind": "kill", "target": name, "selector": self.target, "flap": i}
            info.update(self._primary_info(name))
            self.ctx.record("fault-start", info)
            be.kill(name)
            self._wait(p["down_s"])
            be.restart(name)
            self.ctx.record("fault-stop", {"kind": "kill", "target": name, "flap": i, "why": "flap"})
            self.done = i + 1
            self._wait(p["period_s"])

    def _wait(self, s: float) -> None:
        """`s` seconds on the run's clock, cut short by the heal."""
        self.ctx.clock.wait_until(self.stop.is_set, s, 0.01)

    def _primary_info(self, name: str) -> dict:
        if not name.startswith("shard-"):
            return {}
        shard = int(name.split("-")[1].split("/")[0])
        rec = self.ctx.backend.routing().get(shard)
        return {"shard": shard, "epoch": rec.epoch if rec else 0, "was_primary": bool(rec and rec.primary == name)}

    def heal(self) -> None:
        self.stop.set()
        if not self.ctx.clock.join(self.thread, 30):
            self._error("the flap thread did not stop within 30 s of its heal")
        done = getattr(self, "done", 0)
        self.info["flaps_done"] = done
        if done < self.params["count"]:
            self._error(f"only {done} of {self.params['count']} flaps happened before the fault was healed "
                        "(the workload ended first?)")
