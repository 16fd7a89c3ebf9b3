"""The bind-mounted image (`cluster.image: host`): built locally, with no pull, in well under a
second, cached by content. The default is the self-contained image (build.py); this one is the
fast option while developing pschaos, and tests this machine in a cgroup, not an artifact.

No registry is reachable where pschaos runs, and the code under test already lives on this
machine, so the image carries nothing but a root skeleton (merged-/usr symlinks, empty mount
points, a passwd line for root): `docker import` of a tar made here. What runs in a container
comes from the host, bind-mounted read-only at the same paths (see `mounts`): /usr (the C
libraries, etcd, /bin/sh), the Python installation the venv was made from, the venv and the
checkout (an editable install). The same paths inside and out mean the configs, argv and event
files the process backend writes work unchanged.

The tag carries a hash of the tar and of this recipe, so a changed skeleton is a new image and an
unchanged one is built once per engine.
"""
from __future__ import annotations

import fcntl
import hashlib
import io
import os
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.tools import REPO
from pschaos.harness.backends.docker.engine import LABEL_KIND

RECIPE = "pschaos-base/1"        # bump when the meaning of the skeleton changes
REPOSITORY = "pschaos-base"
DIRS = ("etc", "tmp", "proc", "sys", "dev", "run", "root", "usr", "var/tmp")
LINKS = {"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}
FILES = {"etc/passwd": b"root:x:0:0:root:/root:/bin/sh\n", "etc/group": b"root:x:0:\n"}


def skeleton_tar() -> bytes:
    """The image's whole content, byte for byte the same on every call (mtime 0, uid 0)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        def add(name: str, kind: bytes, mode: int, link: str = "", data: bytes = b"") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.linkname, info.mtime, info.size = kind, mode, link, 0, len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
        for d in DIRS:
            add(d, tarfile.DIRTYPE, 0o1777 if d.endswith("tmp") else 0o755)
        for name, target in LINKS.items():
            add(name, tarfile.SYMTYPE, 0o777, target)
        for name, data in FILES.items():
            add(name, tarfile.REGTYPE, 0o644, data=data)
    return buf.getvalue()


def image_tag(tar: bytes | None = None) -> str:
    digest = hashlib.sha256(RECIPE.encode() + (tar if tar is not None else skeleton_tar())).hexdigest()
    return f"{REPOSITORY}:{digest[:16]}"


def merged_usr_problem(root: str = "/") -> str | None:
    """Why this host cannot lend its /usr to the skeleton, or None. The skeleton's /bin, /sbin,
    /lib and /lib64 are links into the bind-mounted /usr (a merged /usr, as Debian 12 has): on a
    host where /bin is a real folder, /bin/sh and the loader would be missing in every container."""
    for name in ("bin", "lib"):
        p = os.path.join(root, name)
        if not (os.path.islink(p) and os.readlink(p).rstrip("/") in (f"usr/{name}", f"/usr/{name}")):
            return (f"{p} is not a link to usr/{name}: the docker backend's image borrows the host's /usr and "
                    "needs a merged /usr (Debian 12 and later, Ubuntu 22.04 and later); on this host build "
                    "docker/Dockerfile instead (see docs/docker.md)")
    return None


def ensure_image(client: Any) -> str:
    """The image's tag, importing it when this engine lacks it. A file lock keeps two runs
    starting at once (pytest -n 2) from importing it twice (the loser's copy would dangle).
    A host without a merged /usr is refused first (HarnessError naming the fix)."""
    why = merged_usr_problem()
    if why:
        raise HarnessError(why)
    docker = sys.modules["docker"]
    tar = skeleton_tar()
    tag = image_tag(tar)
    lock = Path(tempfile.gettempdir()) / "pschaos-image.lock"
    with open(lock, "a") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            client.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        repo, version = tag.split(":")
        client.api.import_image_from_data(tar, repository=repo, tag=version,
                                          changes=[f"LABEL {LABEL_KIND}=base-image"])
        client.images.get(tag)       # fails loudly if the import did not produce it
        return tag


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def mounts(run_dir: Path) -> dict[str, dict[str, str]]:
    """Host paths a container sees at the same place: everything read-only but the run folder."""
    ro: list[Path] = [Path("/usr"), REPO]
    for p in (Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()):
        if not _under(p, ro):
            ro.append(p)
    binds = {str(p): {"bind": str(p), "mode": "ro"} for p in ro}
    binds[str(run_dir)] = {"bind": str(run_dir), "mode": "rw"}
    return binds


def environment() -> dict[str, str]:
    """What every container's process gets: the host's PATH order, unbuffered Python, one OpenMP
    thread (as the process backend's children), and a writable HOME."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
            "HOME": "/tmp"}
