"""The run's history: one append-only JSON-lines file of every operation and fault.

Nodes and workers write their own event files (psnodes knows nothing of the harness); the
harness writes faults and observations to its own, and `merge` folds them into `history.jsonl`
ordered by time, with `t` in seconds since the run started (DESIGN.md, "History event").
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from pschaos.harness.history.clock import WALL, Clock


class History:
    def __init__(self, path: Path, clock: Clock = WALL) -> None:
        self.path, self.clock = path, clock
        path.parent.mkdir(parents=True, exist_ok=True)
        self.t0 = clock.now()
        self._f = open(path, "a", buffering=1)
        self._lock = threading.Lock()

    def record(self, f: str, value: dict, type_: str = "info", node: str = "harness",
               op_id: str | None = None, t: float | None = None) -> dict:
        ev = {"t": t if t is not None else self.clock.now(), "node": node, "type": type_, "f": f, "value": value}
        if op_id is not None:
            ev["op_id"] = op_id
        with self._lock:
            self._f.write(json.dumps(ev) + "\n")
        return ev

    def close(self) -> None:
        self._f.close()


def read_events(path: Path) -> list[dict]:
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue   # a line torn by a SIGKILL mid-write
    except FileNotFoundError:
        pass
    return out


def merge(t0: float, sources: list[Path], out: Path) -> list[dict]:
    """Merge event files into one history ordered by time; returns the events."""
    events = [e for p in sources for e in read_events(p)]
    for e in events:
        e["t"] = round(e["t"] - t0, 6)      # "pid" stays: it tells two incarnations of a worker apart
    events.sort(key=lambda e: e["t"])
    with open(out, "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    return events


# a psnodes worker's, an adapted system's worker's, a training job's shim's
STEP_EVENTS = ('"train-step"', '"workload-step"', '"f": "step", "value"')


class StepWatcher:
    """Follows a worker's event file to know its current training step (for step-timed faults)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pos = 0
        self.step = -1

    def poll(self) -> int:
        try:
            with open(self.path) as f:
                f.seek(self.pos)
                chunk = f.read()
        except FileNotFoundError:
            return self.step
        end = chunk.rfind("\n")
        if end < 0:
            return self.step
        self.pos += len(chunk[: end + 1].encode())
        for line in chunk[: end + 1].splitlines():
            if any(f in line for f in STEP_EVENTS):
                try:
                    self.step = max(self.step, json.loads(line)["value"]["step"])
                except (json.JSONDecodeError, KeyError):
                    pass
        return self.step
