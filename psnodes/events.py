"""The node's own event log: promotions, step-downs, syncs, checkpoints, restores (JSON lines).

A harness merges these files into its history; psnodes only appends and never reads them.
Times are wall-clock seconds so that logs of different processes can be merged.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path

from pschaos.psnodes.runtime import REAL, Runtime


class EventLog:
    def __init__(self, path: Path | None, node: str, runtime: Runtime = REAL) -> None:
        self.node = node
        self.runtime = runtime
        self._lock = threading.Lock()
        self._f = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._f = open(path, "a", buffering=1)

    def emit(self, f: str, value: dict, type_: str = "info", op_id: str | None = None) -> None:
        if self._f is None:
            return
        ev = {"t": self.runtime.time(), "node": self.node, "type": type_, "f": f, "value": value,
              "pid": self.runtime.pid()}
        if op_id is not None:
            ev["op_id"] = op_id
        line = json.dumps(ev)
        with self._lock:
            self._f.write(line + "\n")

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
