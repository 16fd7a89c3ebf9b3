"""What the nodes wrote to their logs during a fuzz run: ERROR records and tracebacks.

A node's stderr is its log file (the ProcessBackend puts it at run_dir/logs/<node>.log, with
'/' in the name as '-'), written with the `logging` module one record a line: "<date> <time>
<LEVEL> <logger> [<node>] <message>", a traceback's lines after the record they belong to. A
handler that fails on an unexpected exception logs it at ERROR with its traceback (and may still
answer with a tidy status code), so the answers alone do not show it: the fuzzer reads the new
part of every node's log after each case, and each ERROR (or CRITICAL) record, or traceback
outside one, is a finding of its own.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

RECORD = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ ([A-Z]+) ")
BAD_LEVELS = (b"ERROR", b"CRITICAL")
TRACEBACK = b"Traceback (most recent call last)"


class LogWatch:
    """The node logs of one cluster, read from where the last look stopped."""

    def __init__(self, folder: Path | None, pattern: str = "shard-*.log") -> None:
        self.folder, self.pattern = folder, pattern
        self.offsets: dict[Path, int] = {}
        self.level: dict[Path, bytes] = {}      # level of the last record read per file (continuations)

    @classmethod
    def of(cls, be: Any) -> "LogWatch":
        run_dir = getattr(be, "run_dir", None)
        return cls(Path(run_dir) / "logs" if run_dir is not None else None)

    def new_errors(self) -> list[tuple[str, str]]:
        """(log file's node, text) for each ERROR record or traceback written since the last call."""
        if self.folder is None or not self.folder.is_dir():
            return []
        out: list[tuple[str, str]] = []
        for path in sorted(self.folder.glob(self.pattern)):
            start = self.offsets.get(path, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(start)
                    chunk = f.read()
            except OSError:
                continue
            end = chunk.rfind(b"\n") + 1          # whole lines only: the rest is read next time
            if not end:
                continue
            self.offsets[path] = start + end
            out += [(path.stem, text) for text in self._scan(path, chunk[:end])]
        return out

    def _scan(self, path: Path, chunk: bytes) -> list[str]:
        found: list[list[bytes]] = []
        level = self.level.get(path, b"")
        current: list[bytes] | None = None      # the ERROR item that continuation lines extend
        for line in chunk.splitlines():
            m = RECORD.match(line)
            if m:
                level = m.group(1)
                current = [line] if level in BAD_LEVELS else None
                if current is not None:
                    found.append(current)
            elif level in BAD_LEVELS:
                if current is not None:
                    current.append(line)
            elif TRACEBACK in line:               # a traceback outside an ERROR record
                level = b"ERROR"
                current = [line]
                found.append(current)
        self.level[path] = level
        return [_summary(lines) for lines in found]


def _summary(lines: list[bytes]) -> str:
    """The record's first line and, when a traceback follows, its last line (the exception)."""
    head = lines[0].decode(errors="replace")
    tail = [ln for ln in lines[1:] if ln.strip() and not ln.startswith((b" ", b"\t"))]
    last = tail[-1].decode(errors="replace") if tail and tail[-1] != lines[0] else ""
    text = head if not last or TRACEBACK.decode() in last else f"{head} | {last}"
    return text[:400]
