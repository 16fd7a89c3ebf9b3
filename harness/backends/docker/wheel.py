"""What the self-contained image installs: this pschaos as a wheel, and its requirements pinned
to the versions installed here (so the containers run the code and the libraries the host runs).

A checkout (an editable install, CI) builds its wheel with pip; an installed pschaos (a user's
`pip install`) is packed back into a wheel from its own installed files and their RECORD, so a
user needs neither the source nor a network for this step.
"""
from __future__ import annotations

import base64
import hashlib
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.tools import CHECKOUT, REPO

SKIP_DIST_INFO = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}
# what setup.py packages, and the files its metadata reads
SOURCES = ("setup.py", "pyproject.toml", "README.md", "LICENSE", "pschaos", "harness", "psnodes", "netfaults",
           "diskfaults", "reports", "scenarios")


def pinned_requirements(dist_name: str = "pschaos") -> list[str]:
    """`name==version` for each requirement of the distribution (extras and markers that do not
    hold here left out), at the version installed here; one not installed keeps its own spec."""
    from packaging.requirements import Requirement

    out = []
    for line in metadata.distribution(dist_name).requires or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            out.append(f"{req.name}=={metadata.version(req.name)}")
        except metadata.PackageNotFoundError:
            out.append(str(req))
    return sorted(set(out))


def staged_sources(dest: Path) -> Path | None:
    """A copy of what the wheel is built from (a checkout's package folders and the files its
    metadata reads), or None for an installed pschaos (its wheel is packed from its files)."""
    if not CHECKOUT:
        return None
    dest.mkdir(parents=True)
    for name in SOURCES:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif p.is_file():
            shutil.copy2(p, dest / name)
    return dest


def source_digest(src: Path | None, dist_name: str = "pschaos") -> bytes:
    """A digest of what the wheel holds, without building it (a build takes seconds, and every
    docker run asks): the staged sources' names and bytes, else the installed distribution's
    RECORD (each installed file's hash). The same code gives the same digest."""
    h = hashlib.sha256()
    if src is not None:
        for f in sorted(f for f in src.rglob("*") if f.is_file()):
            h.update(str(f.relative_to(src)).encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
        return h.digest()
    dist = metadata.distribution(dist_name)
    h.update(f"{dist_name} {dist.version}\0".encode() + (dist.read_text("RECORD") or "").encode())
    return h.digest()


def pschaos_wheel(out: Path, src: Path | None) -> Path:
    """This pschaos's wheel, written into `out`: built from the staged sources `src` (without
    build isolation when this venv has setuptools, else isolated), or packed from the installed
    files when there are none."""
    if src is None:
        return repack(out)
    tries = [["--no-build-isolation"], []] if _has_setuptools() else [[]]
    for isolation in tries:
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w", str(out),
                            str(src)], capture_output=True, text=True)
        wheels = sorted(out.glob("pschaos-*.whl"))
        if r.returncode == 0 and wheels:
            return wheels[0]
    raise HarnessError(f"pip wheel {REPO} failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-600:]}")


def _has_setuptools() -> bool:
    try:
        return int(metadata.version("setuptools").split(".")[0]) >= 61
    except (metadata.PackageNotFoundError, ValueError):
        return False


def repack(out: Path, dist_name: str = "pschaos") -> Path:
    """The installed distribution as a wheel again: every installed file its RECORD lists under
    site-packages (scripts in bin/ are made again by the install from entry_points.txt)."""
    dist = metadata.distribution(dist_name)
    files = [f for f in dist.files or [] if not str(f).startswith("..") and "__pycache__" not in f.parts
             and not (f.parent.name.endswith(".dist-info") and f.name in SKIP_DIST_INFO)]
    info = next((f.parent for f in dist.files or [] if f.parent.name.endswith(".dist-info")), None)
    if info is None or not files:
        raise HarnessError(f"{dist_name} {dist.version}: its installed files are not listed (no RECORD); "
                           "reinstall it with pip, or name an image (cluster.image) built from docker/Dockerfile")
    name = f"{re.sub(r'[-_.]+', '_', dist_name)}-{dist.version}-py3-none-any.whl"
    path = out / name
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(files, key=str):
            data = Path(dist.locate_file(f)).read_bytes()
            z.writestr(str(f), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{f},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


__all__ = ["pinned_requirements", "pschaos_wheel", "repack", "source_digest", "staged_sources"]
