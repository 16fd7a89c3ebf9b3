"""The power-loss disk's records: a file's held content, a directory change not yet durable, and
what a power cut took. Plain data; disk.py keeps them and acts on them."""
from __future__ import annotations

from dataclasses import dataclass, field

Key = tuple[int, int]         # (st_dev, st_ino) of a file on the disk


@dataclass
class Held:
    """A file's content as the program sees it, not yet on the disk, and its last write."""
    data: bytearray
    last: tuple[int, bytes] | None = None


@dataclass
class Change:
    """A directory change not yet durable: `entries` are (directory inode, name) it touched (the
    first is where it happened, a rename's second its destination), `pending` the directory
    inodes still to be fsynced, `trash` what it moved aside (an unlinked or replaced entry)."""
    kind: str
    entries: list[tuple[int, str]]
    pending: set[int]
    trash: str | None = None
    mode: int = 0o755
    inode: int | None = None            # create: what it made; rmdir: the folder it removed
    replaced_dir: bool = False          # rename: it replaced an empty folder (`mode`), remade by an undo
    said: str = ""


@dataclass
class Loss:
    """What a power loss took: files whose held data was dropped, changes undone, and any change
    that could not be undone (the disk is then not what a real one would hold: the caller fails)."""
    dropped: dict[str, int] = field(default_factory=dict)
    undone: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    torn: dict | None = None

    def as_dict(self) -> dict:
        return {"dropped_files": self.dropped, "dropped_bytes": sum(self.dropped.values()),
                "undone": self.undone, "undo_errors": self.errors, "torn": self.torn}
