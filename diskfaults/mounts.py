"""Mount a power-loss disk in front of a folder, cut its power, take it down, and find the ones a
killed run left.

    with DiskMount(store, mount, env=tags) as m:     # a node's data folder is `mount`
        ...                                           # the node writes, syncs, is killed
        loss = m.power_loss()                          # what a disk would hold now: the node restarts on it

`store` holds the disk (store/disk) and what unlinks put aside (store/trash); the mount shows the
disk. Every mount has the file system type `fuse.pschaos-disk`, so `mounted()` finds them in
/proc/self/mountinfo and `reap()` unmounts those under a folder whatever process made them.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from pschaos.diskfaults.serve import FSTYPE

START_S = 10.0


class DiskError(RuntimeError):
    """The disk could not be mounted, answered an error, or did not come down."""


def available() -> str:
    """'' when a power-loss disk can be mounted here, else what is missing and how to get it."""
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse: the kernel's FUSE is needed (a container needs --device /dev/fuse)"
    try:
        import mfusepy  # noqa: F401
    except ImportError:
        return "mfusepy is not installed: pip install 'pschaos[disk]'"
    except OSError as e:
        return f"libfuse3 is missing ({e}): apt-get install fuse3 (Debian; libfuse3 elsewhere)"
    return ""


def served(under: Path | None = None) -> dict[Path, int | None]:
    """Every power-loss disk mounted now (under `under`, when given), with the pid that serves it."""
    out: dict[Path, int | None] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_bytes().splitlines()
    except OSError:
        return out
    uid = f"user_id={os.getuid()}".encode()
    for line in lines:
        pre, _, post = line.partition(b" - ")
        fields = post.split(b" ")
        if fields[0] != ("fuse." + FSTYPE).encode() or uid not in (fields[2] if len(fields) > 2 else b"").split(b","):
            continue                       # another kind of mount, or another user's disk
        point = Path(os.fsdecode(_unescape(pre.split(b" ")[4])))
        _, _, pid = (fields[1].decode(errors="replace") if len(fields) > 1 else "").partition(":")
        if under is None or point == under or under in point.parents:
            out[point] = int(pid) if pid.isdigit() else None
    return out


def _unescape(field: bytes) -> bytes:
    """mountinfo's octal escapes (space, tab, newline, backslash) decoded, on bytes."""
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)


def mounted(under: Path | None = None) -> list[Path]:
    """Every power-loss disk mounted now (under `under`, when given)."""
    return list(served(under))


def unmount(point: Path) -> bool:
    """Lazily unmount `point` (open files keep working until closed); whether it is gone."""
    for cmd in (["fusermount3", "-u", "-z", str(point)], ["umount", "-l", str(point)]):
        try:
            subprocess.run(cmd, capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if point not in mounted():
            return True
    return point not in mounted()


def _serving(pid: int | None) -> bool:
    if pid is None:
        return False
    import psutil

    try:
        return "pschaos.diskfaults.serve" in " ".join(psutil.Process(pid).cmdline())
    except psutil.AccessDenied:
        return True                   # cannot be told: it may serve a live run, so it is left alone
    except Exception:  # noqa: BLE001 - gone, or a zombie: no server of ours
        return False


def reap(under: Path | None = None, all_mounts: bool = False) -> list[str]:
    """Unmount the power-loss disks (under `under`) whose serving process is gone (a killed run's:
    the kernel keeps such a mount, every call on it failing), or every one with `all_mounts`;
    what was unmounted."""
    return [str(p) for p, pid in served(under).items() if (all_mounts or not _serving(pid)) and unmount(p)]


class DiskMount:
    """One power-loss disk: its serving process, its mount and its control socket."""

    def __init__(self, store: Path, mount: Path, env: dict[str, str] | None = None) -> None:
        self.store, self.mount = Path(store).resolve(), Path(mount).resolve()     # as mountinfo names it
        self.env = {**os.environ, **(env or {})}
        self.control = f"pschaos-disk-{uuid.uuid4().hex}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "DiskMount":
        why = available()
        if why:
            raise DiskError(f"power-loss disk at {self.mount}: {why}")
        self.store.mkdir(parents=True, exist_ok=True)
        self.mount.mkdir(parents=True, exist_ok=True)
        log = open(self.store / "serve.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "pschaos.diskfaults.serve", str(self.store),
                                      str(self.mount), self.control], stdout=log, stderr=log, env=self.env,
                                     start_new_session=True)
        log.close()
        try:
            end = time.monotonic() + START_S
            while time.monotonic() < end:
                if self.mount in mounted() and self._answers():
                    return self
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        except BaseException:            # Ctrl-C while it starts: nothing is left mounted
            self.stop()
            raise
        self.stop()
        said = (self.store / "serve.log").read_text(errors="replace")[-1500:]
        raise DiskError(f"power-loss disk at {self.mount} did not come up in {START_S:.0f} s: {said or 'no output'}")

    def _answers(self) -> bool:
        try:
            return bool(self.ask({"op": "status"}).get("ok"))
        except (OSError, DiskError):
            return False

    def ask(self, req: dict, timeout: float = 30.0) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect("\0" + self.control)
            s.sendall(json.dumps(req).encode() + b"\n")
            with s.makefile("rb") as f:
                line = f.readline()
        if not line:
            raise DiskError(f"power-loss disk at {self.mount} closed the control socket without an answer")
        return json.loads(line)

    def power_loss(self, torn: dict | None = None) -> dict:
        """Drop what was never synced (the node using it should be dead: a live one keeps writing)."""
        out = self.ask({"op": "power-loss", **({"torn": torn} if torn else {})})
        if not out.get("ok"):
            raise DiskError(f"power-loss disk at {self.mount}: {out.get('error')}")
        return out

    def status(self) -> dict:
        return self.ask({"op": "status"})

    def order(self, op: str, /, **fields) -> dict:
        """A control request that must succeed (arm, disarm, power-on: serve.py); DiskError if not."""
        out = self.ask({"op": op, **fields})
        if not out.get("ok"):
            raise DiskError(f"power-loss disk at {self.mount}: {op}: {out.get('error')}")
        return out

    def serving(self) -> bool:
        """Its process still runs (a disk whose server died is no disk: calls on it fail)."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        """Unmount and end the serving process; lazily and by force when it does not go."""
        p = self.proc
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGTERM)           # libfuse's handler unmounts and returns
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if self.mount in mounted():
            unmount(self.mount)
        if p is not None and p.poll() is None:
            p.kill()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self.mount in mounted():
            raise DiskError(f"power-loss disk at {self.mount} is still mounted after its stop")

    def __enter__(self) -> "DiskMount":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
