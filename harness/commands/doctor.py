"""`pschaos doctor`: which real parts are present, their versions, and how to install what is not."""
from __future__ import annotations

import importlib.metadata as md
import json
import re
import sys

from pschaos.harness.backends.docker.engine import network_status, server_version
from pschaos.harness.machinery.tools import INSTALL, version

PARTS = [("etcd", "etcd"), ("toxiproxy-server", "toxiproxy-server"), ("nft", "nft"), ("docker-cli", "docker"),
         ("debootstrap", "debootstrap"),        # the docker backend's default image base (harness/backends/docker/build.py)
         ("redis-server", "redis-server"), ("redis-sentinel", "redis-sentinel")]    # the redis-sentinel adapter's
PY = ["torch", "grpcio", "protobuf", "numpy", "pydantic", "prometheus-client", "pytest", "hypothesis", "docker", "redis"]
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


def collect() -> list[dict]:
    rows = []
    for name, tool in PARTS:
        v = version(tool)
        bad = etcd_problem(v) if tool == "etcd" and v is not None else None
        rows.append({"part": name, "version": v, "ok": v is not None and bad is None, "required": name in REQUIRED,
                     "install": bad or (None if v else INSTALL[tool])})
    engine, why = server_version()      # the engine itself (its API), not only the client binary
    rows.append({"part": "docker-engine", "version": engine, "ok": engine is not None, "required": False,
                 "install": why})
    if engine is not None:              # the network rule: loopback only, no bridge (harness/backends/docker/engine.py)
        broken = network_status()
        rows.append({"part": "docker-network", "version": None if broken else "host network only, no bridge",
                     "ok": broken is None, "required": False, "install": broken})
    for pkg in PY:
        try:
            v = md.version(pkg)
        except md.PackageNotFoundError:
            v = None
        rows.append({"part": pkg, "version": v, "ok": v is not None, "required": pkg in REQUIRED,
                     "install": None if v else f".venv/bin/pip install {pkg}   (or: make install)"})
    rows.append(power_loss_disk())
    try:
        import torch

        cuda = torch.cuda.is_available()
        rows.append({"part": "cuda", "version": torch.version.cuda if cuda else None, "ok": cuda, "required": False,
                     "install": None if cuda else "no GPU visible: workers train on the CPU (device=auto)"})
    except ImportError:
        pass
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


def doctor(as_json: bool = False) -> int:
    rows = collect()
    if as_json:
        print(json.dumps({"python": sys.version.split()[0], "parts": rows}, indent=2))
    else:
        print(f"python {sys.version.split()[0]}")
        for r in rows:
            mark = "ok " if r["ok"] else ("MISSING" if r["required"] else "absent")
            print(f"  {mark:8} {r['part']:18} {r['version'] or ''}")
            if r["install"]:
                print(f"           -> {r['install']}")
    return 0 if all(r["ok"] for r in rows if r["required"]) else 2
