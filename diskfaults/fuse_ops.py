"""The FUSE shell of the power-loss disk: each call of the kernel's, on a path under the mount, as
a call of the model (disk.py) on the same path under the backing folder.

Open files are known by a handle of ours: the backing file's descriptor and its inode, so reads,
writes and syncs follow the file through renames and unlinks, as the kernel's own would. The
mount turns the kernel's caches off (direct_io, zero attribute and entry timeouts): what a
program reads after a power loss comes from the model, never from pages the kernel kept.
"""
from __future__ import annotations

import errno
import itertools
import os
import threading

from mfusepy import FuseOSError, Operations, fuse_get_context

from pschaos.diskfaults.disk import Disk, Key

STAT_FIELDS = ("st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size", "st_blksize",
               "st_atime_ns", "st_mtime_ns", "st_ctime_ns")


class DiskOps(Operations):
    """Operations over a `Disk`."""

    use_ns = True

    def __init__(self, disk: Disk) -> None:
        self.disk = disk
        self.handles: dict[int, tuple[int, Key]] = {}
        self.synced: set[int] = set()           # handles opened O_SYNC or O_DSYNC: each write is durable
        self.numbers = itertools.count(1)
        self.lock = threading.Lock()

    # ----------------------------------------------------------------- handles
    def _open(self, fd: int, flags: int) -> int:
        st = os.fstat(fd)
        with self.lock:
            fh = next(self.numbers)
            self.handles[fh] = (fd, (st.st_dev, st.st_ino))
            if flags & (os.O_SYNC | os.O_DSYNC):
                self.synced.add(fh)
        return fh

    def _handle(self, fh: int | None, path: str | None) -> tuple[int | None, Key]:
        if fh and fh in self.handles:
            return self.handles[fh]
        if path is None:
            raise FuseOSError(errno.EBADF)
        st = os.lstat(self.disk.path(path))
        return None, (st.st_dev, st.st_ino)

    # ----------------------------------------------------------------- reads
    def getattr(self, path: str, fh: int | None = None) -> dict:
        got = self.handles.get(fh) if fh else None      # an open file, unlinked perhaps: its own fd
        st = os.fstat(got[0]) if got else os.lstat(self.disk.path(path))
        out = {k: getattr(st, k) for k in STAT_FIELDS}
        size = self.disk.size((st.st_dev, st.st_ino))
        if size is not None:
            out["st_size"] = size
            out["st_blocks"] = (size + 511) // 512
        else:
            out["st_blocks"] = st.st_blocks
        return out

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", ".."] + os.listdir(self.disk.path(path))

    def readlink(self, path: str) -> str:
        return os.readlink(self.disk.path(path))

    def statfs(self, path: str) -> dict:
        sv = os.statvfs(self.disk.root)
        return {k: getattr(sv, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                            "f_files", "f_flag", "f_frsize", "f_namemax")}

    def access(self, path: str, amode: int) -> int:
        if not os.access(self.disk.path(path), amode):
            raise FuseOSError(errno.EACCES)
        return 0

    # ----------------------------------------------------------------- files
    def open(self, path: str, flags: int) -> int:
        """Our descriptor is read-write whatever the program asked (an fsync may come through a
        read-only one); O_TRUNC is ours to do (libfuse3 passes it on: atomic_o_trunc)."""
        p = self.disk.path(path)
        try:
            fd = os.open(p, os.O_RDWR)
        except OSError:
            fd = os.open(p, os.O_RDONLY)
        fh = self._open(fd, flags)
        if flags & os.O_TRUNC and flags & os.O_ACCMODE:
            st = os.fstat(fd)
            self.disk.truncate((st.st_dev, st.st_ino), fd, path, 0)
        return fh

    def create(self, path: str, mode: int, flags: int = 0) -> int:
        return self._open(self.disk.create(path, mode), flags)

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        fd, key = self._handle(fh, path)
        if fd is None:
            fd = os.open(self.disk.path(path), os.O_RDONLY)
            try:
                return self.disk.read(key, fd, size, offset)
            finally:
                os.close(fd)
        return self.disk.read(key, fd, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        fd, key = self._handle(fh, path)
        n = self.disk.write(key, fd, path, data, offset)
        if fh in self.synced:
            self._sync(key, fd, path)
        return n

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        fd, key = self._handle(fh, path)
        self.disk.truncate(key, fd, path, length)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        fd, key = self._handle(fh, path)
        self._sync(key, fd, path)
        return 0

    def _sync(self, key: Key, fd: int | None, path: str) -> None:
        """Sync a file, naming its caller: a trap waiting for this sync (tear.py) kills it first."""
        self.disk.fsync(key, fd, path, caller=fuse_get_context()[2])

    def flush(self, path: str, fh: int) -> int:
        return 0                      # close is not a sync: the data stays held

    def release(self, path: str, fh: int) -> int:
        with self.lock:
            got = self.handles.pop(fh, None)
            self.synced.discard(fh)
            still = got is not None and any(k == got[1] for _, k in self.handles.values())
        if got:
            if not still and os.fstat(got[0]).st_nlink == 0:
                self.disk.forget(got[1])        # no name and no program reaches it: nothing to keep
            os.close(got[0])
        return 0

    # ----------------------------------------------------------------- directories
    def opendir(self, path: str) -> int:
        return 0

    def releasedir(self, path: str, fh: int) -> int:
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self.disk.fsyncdir(path)
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        self.disk.mkdir(path, mode)
        return 0

    def rmdir(self, path: str) -> int:
        self.disk.rmdir(path)
        return 0

    def unlink(self, path: str) -> int:
        self.disk.unlink(path)
        return 0

    def rename(self, old: str, new: str) -> int:
        self.disk.rename(old, new)
        return 0

    def mknod(self, path: str, mode: int, dev: int) -> int:
        self.disk.mknod(path, mode, dev)
        return 0

    def symlink(self, target: str, source: str) -> int:
        self.disk.symlink(target, source)        # mfusepy: symlink(link path, what it points to)
        return 0

    def link(self, target: str, source: str) -> int:
        self.disk.link(target, source)           # mfusepy: link(new name, existing file)
        return 0

    # ----------------------------------------------------------------- attributes (not modelled)
    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self.disk.path(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self.disk.path(path), uid, gid, follow_symlinks=False)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self.disk.path(path), follow_symlinks=False)
        else:
            os.utime(self.disk.path(path), ns=times, follow_symlinks=False)
        return 0
