"""The base of the self-contained image: Debian bookworm made here with `debootstrap`.

No image registry is reachable where pschaos runs its own tests, so the base is made from
Debian's packages (minbase with python3, python3-venv, etcd-server and ca-certificates) and
`docker import`ed, about 70 s once per engine. Where debootstrap cannot run (not installed, or
not root), a machine that can pull uses `python:3.11-slim-bookworm` instead, as any python:3.11
base works; `PSCHAOS_DOCKER_BASE` names a base outright.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from pschaos.harness.errors import HarnessError, MissingDependency
from pschaos.harness.backends.docker.engine import LABEL_KIND

RECIPE = "pschaos-debian/1"
REPOSITORY = "pschaos-debian"
SUITE = "bookworm"
MIRROR = os.environ.get("PSCHAOS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PACKAGES = ("python3", "python3-venv", "etcd-server", "ca-certificates")
PULLED = "python:3.11-slim-bookworm"
Say = Callable[[str], None]


def base_tag() -> str:
    h = hashlib.sha256("\0".join((RECIPE, SUITE, MIRROR, *PACKAGES)).encode()).hexdigest()
    return f"{REPOSITORY}:{h[:16]}"


def have(client: Any, tag: str) -> bool:
    docker = sys.modules["docker"]
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def base_image(client: Any, say: Say) -> str:
    """The base's tag: PSCHAOS_DOCKER_BASE, else the debootstrap base (made when missing), else
    python:3.11-slim-bookworm pulled where debootstrap cannot run."""
    docker = sys.modules["docker"]
    named = os.environ.get("PSCHAOS_DOCKER_BASE")
    if named:
        if not have(client, named):
            say(f"pulling the base {named} (PSCHAOS_DOCKER_BASE)")
            try:
                client.images.pull(named)
            except docker.errors.APIError as e:
                raise MissingDependency(f"PSCHAOS_DOCKER_BASE={named}: the engine has no such image and could not "
                                        f"pull it ({e.explanation or e})") from None
        return named
    tag = base_tag()
    if have(client, tag):
        return tag
    why = _cannot_debootstrap()
    if why is None:
        return _debootstrap(client, tag, say)
    try:
        if not have(client, PULLED):
            say(f"{why}: pulling {PULLED} as the base instead")
            client.images.pull(PULLED)
        return PULLED
    except docker.errors.APIError as e:
        raise MissingDependency(f"the docker backend's image needs a base: {why}, and {PULLED} could not be pulled "
                                f"({e.explanation or e}); install debootstrap (apt-get install -y debootstrap, as "
                                "root), or name a base the engine has: PSCHAOS_DOCKER_BASE=IMAGE") from None


def _cannot_debootstrap() -> str | None:
    if shutil.which("debootstrap") is None:
        return "debootstrap is not installed"
    if os.geteuid() != 0:
        return "debootstrap needs root"
    return None


def _debootstrap(client: Any, tag: str, say: Say) -> str:
    say(f"making the Debian base {tag} with debootstrap ({SUITE}, minbase, from {MIRROR}; about a minute)")
    tmp = tempfile.mkdtemp(prefix="pschaos-rootfs-", dir="/var/tmp")
    root = Path(tmp) / "root"
    try:
        out = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE,
                              str(root), MIRROR], capture_output=True, text=True)
        if out.returncode != 0:
            raise HarnessError(f"debootstrap {SUITE} failed (exit {out.returncode}): "
                               f"{(out.stderr or out.stdout).strip()[-400:]}; is {MIRROR} reachable "
                               "(PSCHAOS_DEBIAN_MIRROR names another)?")
        shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        tar = Path(tmp) / "root.tar"
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "--one-file-system", "-cf", str(tar), "."],
                       check=True)
        repo, version = tag.split(":")
        client.api.import_image_from_file(str(tar), repository=repo, tag=version,
                                          changes=[f"LABEL {LABEL_KIND}=base-image", 'CMD ["/bin/sh"]'])
    finally:
        remove_rootfs(Path(tmp))
    if not have(client, tag):
        raise HarnessError(f"docker import of the Debian base did not produce {tag}")
    return tag


def remove_rootfs(tmp: Path) -> None:
    """Remove a rootfs folder, unmounting first whatever a killed debootstrap left mounted in it
    (its /proc, /sys): a remove through a mount would reach the host's files."""
    prefix = str(tmp.resolve()) + "/"
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        mounts = []
    for m in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True)
    left = [m for m in (line.split()[1] for line in Path("/proc/mounts").read_text().splitlines())
            if m.startswith(prefix)]
    if left:
        raise HarnessError(f"{tmp}: still mounted under it: {left}; unmount them, then remove the folder")
    shutil.rmtree(tmp, ignore_errors=True)


def stale_rootfs() -> list[Path]:
    """Rootfs folders a killed image build left in /var/tmp (`pschaos clean` removes them)."""
    return sorted(Path("/var/tmp").glob("pschaos-rootfs-*"))


__all__ = ["base_image", "base_tag", "have", "remove_rootfs", "stale_rootfs"]
