"""Node data on size-limited volumes: what makes `disk-full` a real ENOSPC.

Each shard copy's local data folder is its own engine volume (local driver, tmpfs, `size=`),
labelled with the run id, mounted at the path the node's config names. A tmpfs volume lives while
some container has it mounted, so a `holder` container mounts them all for the whole run: a copy
that is killed and restarted finds its data again (as on a disk), and the harness reads the data
on the host at the volume's mount point (the engine mounts it in the host's namespace).
`disk-full` fills what is left of a volume with one file and heals by deleting it.
"""
from __future__ import annotations

import errno
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.docker.containers import ContainerLauncher, container_name

FILLER = ".pschaos-disk-full"
SIZE_MB = 64           # a checkpoint of the library's models is well under this
SIZE_SLACK = 0.05      # how far statvfs' total may be from size_mb (tmpfs rounds to pages)


class DataVolumes:
    def __init__(self, client: Any, launcher: ContainerLauncher, nodes: list[str], data_dir: Callable[[str], Path],
                 log_dir: Path, size_mb: int = SIZE_MB) -> None:
        self.client, self.launcher, self.nodes, self.data_dir = client, launcher, nodes, data_dir
        self.log_dir, self.size_mb = log_dir, size_mb
        self.ready = False
        self._lock = threading.Lock()          # copies start in parallel; the first one creates
        self._mountpoints: dict[str, Path] = {}

    def volume_name(self, node: str) -> str:
        return container_name(self.launcher.run_id, node) + "-data"

    def ensure(self) -> None:
        """Create the volumes and start the holder, once (before the first copy starts)."""
        with self._lock:
            if self.ready:
                return
            for n in self.nodes:
                self.client.volumes.create(name=self.volume_name(n), driver="local", labels=self.launcher.labels(n),
                                           driver_opts={"type": "tmpfs", "device": "tmpfs",
                                                        "o": f"size={self.size_mb}m"})
            self.launcher.run("volumes", [sys.executable, "-c", "import signal; signal.pause()"],
                              self.log_dir / "volumes.log", keep=False)     # outlives the nodes: see save
            self.ready = True

    def mounts(self, name: str) -> dict[str, dict[str, str]]:
        """The create option `volumes` for `name` (the holder gets every one)."""
        names = self.nodes if name == "volumes" else [name] if name in self.nodes else []
        return {self.volume_name(n): {"bind": str(self.data_dir(n)), "mode": "rw"} for n in names}

    def host_path(self, node: str) -> Path:
        """Where the engine mounts the volume on the host (asked once: disk-full polls it)."""
        if node not in self._mountpoints:
            self._mountpoints[node] = Path(self.client.volumes.get(self.volume_name(node)).attrs["Mountpoint"])
        return self._mountpoints[node]

    def checked_path(self, node: str) -> Path:
        """The volume's mount point, after checking it is the volume: a mount point in this mount
        namespace whose size is `size_mb`. Filling or wiping trusts the engine's `Mountpoint`; an
        engine in another mount namespace (rootless, a VM, a remote host) names a path that here is
        a plain folder on the host's disk, and filling that would fill the host's disk."""
        path = self.host_path(node)
        if not os.path.ismount(path):
            raise HarnessError(f"{node}: the engine mounts its data volume at {path}, which is no mount point "
                               "here (the engine runs in another mount namespace?); refusing to fill or wipe a "
                               "folder of the host's disk: run dockerd on this machine (.ci/docker-engine)")
        st = os.statvfs(path)
        size = st.f_blocks * st.f_frsize
        want = self.size_mb << 20
        if abs(size - want) > want * SIZE_SLACK:
            raise HarnessError(f"{node}: the mount at {path} is {size >> 20} MiB, not the {self.size_mb} MiB tmpfs "
                               "volume the run created; refusing to fill or wipe it")
        return path

    def fill(self, node: str) -> int:
        """Fill the volume to the last byte; returns how many bytes that took."""
        path = self.checked_path(node) / FILLER
        written = 0
        with open(path, "ab", buffering=0) as f:
            for chunk in (1 << 20, 4096, 1):
                block = b"\0" * chunk
                while True:
                    try:
                        written += f.write(block)
                    except OSError as e:
                        if e.errno != errno.ENOSPC:
                            raise
                        break
        return written

    def free(self, node: str) -> None:
        (self.host_path(node) / FILLER).unlink(missing_ok=True)

    def wipe(self, node: str) -> None:
        """A lost disk: everything on the volume goes (the mount point itself stays)."""
        root = self.checked_path(node)
        for p in root.iterdir():
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)

    def save(self) -> None:
        """Copy every volume's content to the node's folder on the host, before the volumes go:
        a kept run (--keep-data) has its data where the process backend leaves it. Teardown calls
        it after the nodes stopped (their last checkpoints are in) and before the holder goes (a
        tmpfs volume is empty once no container mounts it)."""
        for n in self.nodes:
            try:
                src = self.host_path(n)
                if src.is_dir():
                    shutil.copytree(src, self.data_dir(n), dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns(FILLER))
            except Exception:  # noqa: BLE001 - keeping data is best effort; removal must go on
                continue
