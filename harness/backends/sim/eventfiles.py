"""The simulated processes' event files: one JSON-lines file per node, like psnodes' EventLog.

The simulated copies record through `record(f, value, type_, node, op_id)` (SimHistory's form);
here each event goes to its node's file with `t` on the run's clock (epoch-based virtual
seconds, as the runner's own history) and the `pid` of the node's current incarnation, so the
runner merges and judges them exactly as a process run's files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, TextIO


class EventFiles:
    def __init__(self, folder: Path, now: Callable[[], float]) -> None:
        self.folder, self.now = folder, now
        self.folder.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, TextIO] = {}
        self.closed = False
        self.pids: dict[str, int] = {}

    def path(self, name: str) -> Path:
        return self.folder / (name.replace("/", "-") + ".jsonl")

    def record(self, f: str, value: dict, type_: str = "info", node: str = "harness",
               op_id: str | None = None) -> dict:
        ev = {"t": self.now(), "node": node, "type": type_, "f": f, "value": value, "pid": self.pids.get(node, 0)}
        if op_id is not None:
            ev["op_id"] = op_id
        if self.closed:               # the run ended: nothing more reaches the history
            return ev
        fh = self._files.get(node)
        if fh is None:
            fh = self._files[node] = open(self.path(node), "a", buffering=1)
        fh.write(json.dumps(ev) + "\n")
        return ev

    def files(self) -> list[Path]:
        return sorted(self.path(n) for n in self._files)

    def close(self) -> None:
        self.closed = True
        for fh in self._files.values():
            fh.close()
        self._files.clear()


__all__ = ["EventFiles"]
