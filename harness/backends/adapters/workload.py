"""The workload an adapted system runs: workers that update counters and read them back.

Each worker owns a key (its name) and applies updates to it: +1 to a counter and +amount to a
float accumulator, with the op id recorded beside them, as a parameter server's clients push
increments to their own slots. Every `read_every` updates it reads a key drawn from the seed
(its own or another worker's), so reads race with other clients' writes. It writes the
history's operations itself (invoke, then ok, fail or info), in its own event file, with the
same `t` clock as the runner's, plus `workload-step` every 10 updates (step-timed faults) and a
`train-done` at the end (the evidence check counts workers that did not finish).
"""
from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Callable

from pschaos.harness.backends.adapters.api import Client, Refused


class EventFile:
    """One worker's event file, written by its thread only."""

    def __init__(self, path: Path, node: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f, self.node = open(path, "a", buffering=1), node

    def write(self, type_: str, f: str, value: dict, op_id: str | None = None) -> None:
        ev = {"t": time.time(), "node": self.node, "type": type_, "f": f, "value": value}
        if op_id is not None:
            ev["op_id"] = op_id
        self.f.write(json.dumps(ev) + "\n")

    def close(self) -> None:
        self.f.close()


class Worker(threading.Thread):
    def __init__(self, name: str, make_client: Callable[[str], Client], events: Path, keys: list[str], seed: int,
                 steps: int, duration: float | None, step_delay: float, read_every: int,
                 stopping: Callable[[], bool]) -> None:
        super().__init__(name=f"pschaos-{name}", daemon=True)
        self.worker, self.make_client, self.events, self.keys = name, make_client, events, keys
        self.rng = random.Random(f"{seed}/{name}")      # amounts and read keys: the run's seed
        self.steps, self.duration, self.step_delay, self.read_every = steps, duration, step_delay, read_every
        self.stopping = stopping

    def run(self) -> None:
        ev = EventFile(self.events, self.worker)
        client = self.make_client(self.worker)
        end = time.monotonic() + self.duration if self.duration else None
        op = 0
        try:
            while not self.stopping() and (time.monotonic() < end if end else op < self.steps):
                op += 1
                self._update(ev, client, op)
                if self.read_every and op % self.read_every == 0:
                    self._read(ev, client, op)
                if op % 10 == 0:
                    ev.write("info", "workload-step", {"worker": self.worker, "step": op})
                if self.step_delay:
                    time.sleep(self.step_delay)
            ev.write("info", "train-done", {"worker": self.worker, "steps": op})
        finally:
            client.close()
            ev.close()

    def _update(self, ev: EventFile, client: Client, op: int) -> None:
        v = {"worker": self.worker, "key": self.worker, "op": op, "amount": round(self.rng.uniform(0.5, 1.5), 3)}
        oid = f"{self.worker}/u{op}"
        ev.write("invoke", "update", v, oid)
        try:
            node = client.update(v["key"], op, v["amount"])
            epoch = getattr(client, "epoch", None)      # the term of the primary it wrote to, if it knows
            ev.write("ok", "update", {**v, "node": node, "shard": 0, **({"epoch": epoch} if epoch is not None else {})},
                     oid)
        except Refused as e:
            ev.write("fail", "update", {**v, "error": str(e)[:200]}, oid)
        except Exception as e:  # noqa: BLE001 - it may have been applied: indeterminate, recorded
            ev.write("info", "update", {**v, "error": f"{e.__class__.__name__}: {e}"[:200]}, oid)

    def _read(self, ev: EventFile, client: Client, op: int) -> None:
        key = self.rng.choice(self.keys)
        oid = f"{self.worker}/r{op}"
        ev.write("invoke", "read", {"worker": self.worker, "key": key}, oid)
        try:
            ev.write("ok", "read", {"worker": self.worker, "key": key, "value": int(client.read(key))}, oid)
        except Exception as e:  # noqa: BLE001 - a read that failed says nothing
            ev.write("fail", "read", {"worker": self.worker, "key": key, "error": f"{e.__class__.__name__}: {e}"[:200]},
                     oid)
