"""The real parts a run needs, as rows: which are present, their versions, how to install the rest.
`pschaos doctor` prints them (with the Docker engine's and the power-loss disk's rows), and each
node of a Ray cluster reports them for `--on ray` (harness/fanout/nodes.py)."""
from __future__ import annotations

import importlib.metadata as md
import re

from pschaos.harness.machinery.tools import INSTALL, version

PARTS = [("etcd", "etcd"), ("toxiproxy-server", "toxiproxy-server"), ("nft", "nft"), ("docker-cli", "docker"),
         ("debootstrap", "debootstrap"),        # the docker backend's default image base (harness/backends/docker/build.py)
         ("redis-server", "redis-server"), ("redis-sentinel", "redis-sentinel")]    # the redis-sentinel adapter's
PY = ["torch", "grpcio", "protobuf", "numpy", "pydantic", "prometheus-client", "pytest", "hypothesis", "docker", "redis",
      "accelerate"]      # accelerate: the accelerate-ddp job's launcher
REQUIRED = {"etcd", "torch", "grpcio", "protobuf", "numpy", "pydantic"}


ETCD_MIN = (3, 4)      # the JSON gateway at /v3/ (psnodes/etcd.py)


def etcd_problem(v: str | None) -> str | None:
    """Why this etcd cannot serve pschaos (with the fix), or None: its version line must say 3.4+."""
    m = re.search(r"(\d+)\.(\d+)\.\d+", v or "")
    if m is None:
        return f"cannot read etcd's version from {v!r}; install etcd 3.4 or later: {INSTALL['etcd']}"
    if (int(m.group(1)), int(m.group(2))) < ETCD_MIN:
        return (f"etcd {m.group(0)} is too old: pschaos uses the JSON gateway at /v3/, served from etcd 3.4 on; "
                f"install a newer one: {INSTALL['etcd']}")
    return None


def tool_rows() -> list[dict]:
    """A row per real part (binary): present, its version, required, how to install it."""
    rows = []
    for name, tool in PARTS:
        v = version(tool)
        bad = etcd_problem(v) if tool == "etcd" and v is not None else None
        rows.append({"part": name, "version": v, "ok": v is not None and bad is None, "required": name in REQUIRED,
                     "install": bad or (None if v else INSTALL[tool])})
    return rows


def python_rows() -> list[dict]:
    """A row per Python package a run imports."""
    rows = []
    for pkg in PY:
        try:
            v = md.version(pkg)
        except md.PackageNotFoundError:
            v = None
        rows.append({"part": pkg, "version": v, "ok": v is not None, "required": pkg in REQUIRED,
                     "install": None if v else f".venv/bin/pip install {pkg}   (or: make install)"})
    return rows


def power_loss_disk() -> dict:
    """The power-loss disk (power-loss and torn-write on processes): /dev/fuse, libfuse3, mfusepy."""
    from pschaos.diskfaults.mounts import available

    why = available()
    try:
        v = None if why else f"mfusepy {md.version('mfusepy')}, libfuse3"
    except md.PackageNotFoundError:          # importable from a path of its own, not installed
        v = "mfusepy, libfuse3"
    return {"part": "power-loss-disk", "version": v, "ok": not why, "required": False,
            "install": (why + " (power-loss and torn-write need it)") if why else None}
