"""What a disk holds after a power cut: a folder's files as a program wrote them, with every write
held in a cache of ours until the file is fsynced and every directory change undone unless its
directory was fsynced since.

A kill leaves every written byte in the kernel's page cache, so no kill shows a program that
renames a checkpoint before syncing it, or never syncs the directory it renamed in. Here the
backing folder (`disk`) holds only what a disk would: file data reaches it at fsync, and a
directory change (create, unlink, rename, mkdir, rmdir, link, symlink) reaches it at once but is
logged with what undoes it, until every directory it changed was fsynced. `power_loss` drops the
held data and undoes the logged changes, newest first, as LazyFS does with its own page cache.

The rules, strict as POSIX allows:
- a file's data is durable once the file is fsynced (fsync or fdatasync), not at close;
- a directory change is durable once every directory it changed was fsynced after it (a rename
  across two directories needs both); a file fsynced in a directory never synced vanishes;
- a `torn` power loss lands a prefix of the last held write of one file on the disk: the rest of
  that file's held writes, and every other file's, are gone;
- directories are known by inode, so a rename of a directory keeps what is pending in it;
- attributes (mode, owner, times) go to the disk at once and are not modelled.

Pure Python over a real folder, no FUSE: the FUSE shell (fuse_ops.py) calls it, and its unit tests
call it directly. One lock serialises every call.
"""
from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import threading
import uuid
from pathlib import Path
from typing import Callable

from pschaos.diskfaults.records import Change, Held, Key, Loss
from pschaos.diskfaults.tear import SyncTrap, tear_lands, tearing, trip


def powered(f: Callable) -> Callable:
    """A call that changes the disk: refused with EIO while the power is off (a sync trap fired,
    tear.py), under the disk's lock."""
    def call(self: "Disk", *args, **kw):
        with self.lock:
            if self.off:
                raise OSError(errno.EIO, "the disk's power is off", self.off)
            return f(self, *args, **kw)
    call.__doc__, call.__name__ = f.__doc__, f.__name__
    return call


class Disk:
    """The model over a backing folder `root`; `trash` (same file system) keeps unlinked and
    replaced entries until their removal is durable."""

    def __init__(self, root: Path, trash: Path) -> None:
        self.root, self.trash = Path(root), Path(trash)
        self.trash.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.held: dict[Key, Held] = {}
        self.log: list[Change] = []
        self.syncs = 0
        self.trap: SyncTrap | None = None
        self.off = ""                 # why the power is off ('' while on)

    # ----------------------------------------------------------------- paths
    def path(self, rel: str) -> Path:
        rel = rel.lstrip("/")
        return self.root / rel if rel else self.root

    def _key(self, rel: str) -> Key:
        st = os.lstat(self.path(rel))
        return st.st_dev, st.st_ino

    def _parent(self, rel: str) -> tuple[int, str]:
        p = Path(rel.lstrip("/"))
        return os.lstat(self.path(str(p.parent) if str(p.parent) != "." else "")).st_ino, p.name

    def _dirs(self) -> dict[int, Path]:
        """Every directory on the disk by inode (the tree is a node's data folder: small)."""
        out = {os.lstat(self.root).st_ino: self.root}
        for d, subs, _ in os.walk(self.root):
            for s in subs:
                p = Path(d) / s
                out[os.lstat(p).st_ino] = p
        return out

    # ----------------------------------------------------------------- data
    def _hold(self, key: Key, fd: int | None, rel: str) -> Held:
        h = self.held.get(key)
        if h is None:
            if fd is None:
                with open(self.path(rel), "rb") as f:
                    data = f.read()
            else:
                size = os.fstat(fd).st_size
                data = os.pread(fd, size, 0) if size else b""
            h = self.held[key] = Held(bytearray(data))
        return h

    def size(self, key: Key) -> int | None:
        with self.lock:
            h = self.held.get(key)
            return None if h is None else len(h.data)

    def read(self, key: Key, fd: int, size: int, offset: int) -> bytes:
        with self.lock:
            h = self.held.get(key)
            if h is not None:
                return bytes(h.data[offset:offset + size])
            return os.pread(fd, size, offset)

    @powered
    def write(self, key: Key, fd: int | None, rel: str, data: bytes, offset: int) -> int:
        with self.lock:
            h = self._hold(key, fd, rel)
            if offset > len(h.data):
                h.data.extend(b"\0" * (offset - len(h.data)))
            h.data[offset:offset + len(data)] = data
            h.last = (offset, bytes(data))
            return len(data)

    @powered
    def truncate(self, key: Key, fd: int | None, rel: str, length: int) -> None:
        with self.lock:
            h = self._hold(key, fd, rel)
            if length < len(h.data):
                del h.data[length:]
            else:
                h.data.extend(b"\0" * (length - len(h.data)))
            h.last = None

    @powered
    def fsync(self, key: Key, fd: int | None, rel: str, caller: int = 0) -> None:
        """The file's held data onto the disk, synced; or the power cut, when a trap waits for it:
        then the calling process (`caller`, its pid or thread id; 0 unknown) dies first, SIGKILL
        under the disk's lock, as the power takes the CPU with the disk. It waits for this call's
        answer meanwhile, and its other threads' calls find the power off."""
        with self.lock:
            if self.trap is not None and self.trap.matches(rel or ""):
                if 0 < caller != os.getpid():
                    try:
                        os.kill(caller, signal.SIGKILL)
                    except OSError:
                        pass              # gone already: the cut is the same
                self.trap.fired = trip(self, self.trap, key, rel)
                self.off = f"cut as {rel.lstrip('/')} was synced"
                raise OSError(errno.EIO, "the power went as the file was synced", rel)
            h = self.held.get(key)
            if h is None:
                return
            own = fd is None
            fd = os.open(self.path(rel), os.O_WRONLY) if own else fd
            try:
                os.pwrite(fd, bytes(h.data), 0)
                os.ftruncate(fd, len(h.data))
                os.fsync(fd)
            finally:
                if own:
                    os.close(fd)
            del self.held[key]           # only once it is on the disk: a failed write keeps it held
            self.syncs += 1

    def forget(self, key: Key) -> None:
        """A file no name reaches and no program holds open any more: its held data goes."""
        with self.lock:
            self.held.pop(key, None)

    # ----------------------------------------------------------------- directories
    def _log(self, kind: str, entries: list[tuple[int, str]], said: str, **kw) -> None:
        self.log.append(Change(kind, entries, {d for d, _ in entries}, said=said, **kw))

    def _aside(self, p: Path) -> str:
        name = uuid.uuid4().hex
        os.rename(p, self.trash / name)
        return name

    @powered
    def create(self, rel: str, mode: int) -> int:
        with self.lock:
            fd = os.open(self.path(rel), os.O_CREAT | os.O_EXCL | os.O_RDWR, mode)
            self._log("create", [self._parent(rel)], f"create {rel}", inode=os.fstat(fd).st_ino)
            return fd

    @powered
    def mknod(self, rel: str, mode: int, dev: int) -> None:
        with self.lock:
            os.mknod(self.path(rel), mode, dev)
            self._log("create", [self._parent(rel)], f"mknod {rel}", inode=os.lstat(self.path(rel)).st_ino)

    @powered
    def symlink(self, rel: str, target: str) -> None:
        with self.lock:
            os.symlink(target, self.path(rel))
            self._log("create", [self._parent(rel)], f"symlink {rel}", inode=os.lstat(self.path(rel)).st_ino)

    @powered
    def link(self, rel: str, existing: str) -> None:
        with self.lock:
            os.link(self.path(existing), self.path(rel))
            self._log("create", [self._parent(rel)], f"link {rel}", inode=os.lstat(self.path(rel)).st_ino)

    @powered
    def mkdir(self, rel: str, mode: int) -> None:
        with self.lock:
            os.mkdir(self.path(rel), mode)
            self._log("create", [self._parent(rel)], f"mkdir {rel}", inode=os.lstat(self.path(rel)).st_ino)

    @powered
    def unlink(self, rel: str) -> None:
        with self.lock:
            where = self._parent(rel)
            self._log("unlink", [where], f"unlink {rel}", trash=self._aside(self.path(rel)))

    @powered
    def rmdir(self, rel: str) -> None:
        with self.lock:
            p = self.path(rel)
            st = os.lstat(p)
            if any(os.scandir(p)):
                raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), rel)
            where = self._parent(rel)
            os.rmdir(p)
            self._log("rmdir", [where], f"rmdir {rel}", mode=st.st_mode & 0o7777, inode=st.st_ino)

    @powered
    def rename(self, old: str, new: str) -> None:
        with self.lock:
            src, dst = self._parent(old), self._parent(new)
            source, target = self.path(old), self.path(new)
            trash, mode = None, None
            if os.path.lexists(target) and not os.path.samefile(source, target):
                st = os.lstat(target)
                if stat.S_ISDIR(st.st_mode):
                    mode = st.st_mode & 0o7777      # an empty folder replaced: remade by an undo
                else:
                    trash = uuid.uuid4().hex        # a file replaced: kept by a link, the rename stays atomic
                    os.link(target, self.trash / trash, follow_symlinks=False)
            try:
                os.rename(source, target)
            except OSError:
                if trash:
                    _remove(self.trash / trash)
                raise
            self._log("rename", [src, dst], f"rename {old} -> {new}", trash=trash,
                      mode=mode if mode is not None else 0o755, replaced_dir=mode is not None)

    @powered
    def fsyncdir(self, rel: str) -> None:
        """The directory's changes durable: each change with nothing else pending is final."""
        with self.lock:
            settled = {os.lstat(self.path(rel)).st_ino}
            while settled:
                ino, keep, gone = settled.pop(), [], set()
                for c in self.log:
                    c.pending.discard(ino)
                    if c.pending:
                        keep.append(c)
                        continue
                    if c.trash:
                        self._forget(self.trash / c.trash)
                    if c.kind == "rmdir" and c.inode is not None:
                        gone.add(c.inode)       # nothing in a folder whose removal is durable can be synced
                self.log = keep
                settled |= gone
            self.syncs += 1

    def _forget(self, p: Path) -> None:
        """An unlink or a replacement made durable: the entry put aside goes, and with it the held
        data of a file no name reaches any more."""
        try:
            st = os.lstat(p)
            if st.st_nlink <= 1:
                self.held.pop((st.st_dev, st.st_ino), None)
        except OSError:
            pass
        _remove(p)

    # ----------------------------------------------------------------- the cut
    def power_loss(self, torn: dict | None = None) -> Loss:
        """Drop every held write and undo every change not durable, newest first. `torn`:
        {"path": rel, "keep_bytes": n} lands the first n bytes of that file's last held write."""
        with self.lock:
            loss = Loss()
            tear = None
            if torn is not None:              # what to tear, found before the undo moves names
                tear = tearing(self, str(torn["path"]), int(torn["keep_bytes"]))
            names = self._names()
            for key, h in self.held.items():
                loss.dropped[names.get(key, f"inode {key[1]}")] = len(h.data)
            self.held.clear()
            renamed: dict[int, int] = {}
            for c in reversed(self.log):
                try:
                    self._undo(c, renamed)
                    loss.undone.append(c.said)
                except OSError as e:
                    loss.errors.append(f"{c.said}: {e}")
            self.log.clear()
            if tear is not None:
                loss.torn = tear_lands(self, *tear)
            return loss

    def _names(self) -> dict[Key, str]:
        """Each file's name on the disk; an unlinked one's by the change that put it aside."""
        out = {}
        for d, _, files in os.walk(self.root):
            for f in files:
                p = Path(d) / f
                st = os.lstat(p)
                out[(st.st_dev, st.st_ino)] = str(p.relative_to(self.root))
        for c in self.log:
            if c.trash and (self.trash / c.trash).is_file():
                st = os.lstat(self.trash / c.trash)
                out.setdefault((st.st_dev, st.st_ino), f"{c.said} (put aside)")
        return out

    def _undo(self, c: Change, renamed: dict[int, int]) -> None:
        dirs = self._dirs()

        def at(entry: tuple[int, str]) -> Path:
            ino = renamed.get(entry[0], entry[0])
            if ino not in dirs:
                raise OSError(errno.ENOENT, "its directory is gone", entry[1])
            return dirs[ino] / entry[1]
        def free(p: Path) -> Path:
            if os.path.lexists(p):         # an undo never overwrites what holds the name now
                raise OSError(errno.EEXIST, "the name is held by an entry the cut keeps", str(p))
            return p
        if c.kind == "create":
            p = at(c.entries[0])
            if os.path.lexists(p):
                if c.inode is not None and os.lstat(p).st_ino != c.inode:
                    raise OSError(errno.EEXIST, "the name now holds another entry the cut keeps", str(p))
                _remove(p)
        elif c.kind == "unlink":
            os.rename(self.trash / str(c.trash), free(at(c.entries[0])))
        elif c.kind == "rmdir":
            p = free(at(c.entries[0]))
            os.mkdir(p, c.mode)
            renamed[int(c.inode)] = os.lstat(p).st_ino
        elif c.kind == "rename":
            os.rename(at(c.entries[1]), free(at(c.entries[0])))
            if c.trash:
                os.rename(self.trash / c.trash, free(at(c.entries[1])))
            elif c.replaced_dir:
                os.mkdir(free(at(c.entries[1])), c.mode)

    def arm(self, trap: SyncTrap) -> None:
        """Cut the power at the next sync `trap` matches (one trap at a time: another armed, or
        fired and not yet taken back, is refused)."""
        with self.lock:
            if self.off:
                raise OSError(errno.EIO, "the disk's power is off: power it on first", self.off)
            if self.trap is not None:
                raise OSError(errno.EBUSY, "a trap is armed already: disarm it first", self.trap.name)
            self.trap = trap

    def trap_status(self) -> dict:
        """The trap and whether the power is off, without walking the disk (polled)."""
        with self.lock:
            return {"trap": self.trap.as_dict() if self.trap is not None else None, "off": self.off}

    def disarm(self) -> dict | None:
        """No more trap; what it cut if it fired (the power stays off until `power_on`)."""
        with self.lock:
            trap, self.trap = self.trap, None
            return trap.fired if trap is not None else None

    def power_on(self) -> None:
        """The program that used the disk is dead: its calls are served again."""
        with self.lock:
            self.off = ""

    def status(self) -> dict:
        """What is held now: files and bytes, each named file's last write (what a torn write could
        tear), the directory changes not durable, and how many syncs came."""
        with self.lock:
            names = self._names()
            return {"held_files": len(self.held), "held_bytes": sum(len(h.data) for h in self.held.values()),
                    "held_writes": {names[k]: len(h.last[1]) for k, h in self.held.items()
                                    if h.last and k in names and "(put aside)" not in names[k]},
                    "pending_changes": [c.said for c in self.log], "syncs": self.syncs,
                    "trap": self.trap.as_dict() if self.trap is not None else None, "off": self.off}


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    elif os.path.lexists(p):
        os.unlink(p)
