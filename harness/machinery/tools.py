"""Where the real parts live and how to install each when it is missing."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from pschaos.harness.errors import MissingDependency

REPO = Path(__file__).resolve().parents[2]    # the checkout (or a mutant copy of it); installed: site-packages/pschaos
# a source checkout (or selftest's copy of one) holds pschaos/ beside harness/; an installed wheel does not
CHECKOUT = (REPO / "pschaos" / "__init__.py").is_file() and (REPO / "harness" / "__init__.py").is_file()

INSTALL = {
    "etcd": "apt-get install -y etcd-server   (or: make install)",
    "nft": "apt-get install -y nftables   (or: make install)",
    "toxiproxy-server": ("make install   (GOBIN=tools/bin go install -ldflags \"-X github.com/Shopify/toxiproxy/v2.Version=2.12.0\" "
                         "github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0, then mv tools/bin/server "
                         "tools/bin/toxiproxy-server; without -ldflags it reports version git)"),
    "docker": "apt-get install -y docker.io, then start dockerd",
    "debootstrap": "apt-get install -y debootstrap   (the docker backend's image base; or PSCHAOS_DOCKER_BASE=python:3.11-slim-bookworm)",
    "redis-server": "apt-get install -y redis-server redis-sentinel   (or: make install)",
    "redis-sentinel": "apt-get install -y redis-server redis-sentinel   (or: make install)",
}


def find(tool: str) -> str | None:
    """The binary of a real part: PSCHAOS_<TOOL> when set (PSCHAOS_ETCD=tools/bin/etcd-3.5 runs
    the etcd-facing tests on another etcd), else tools/bin of a checkout, else the PATH."""
    chosen = os.environ.get("PSCHAOS_" + tool.upper().replace("-", "_"))
    if chosen:
        return chosen if Path(chosen).is_file() else None
    local = REPO / "tools" / "bin" / tool
    if local.exists():
        return str(local)
    return shutil.which(tool)


def need(tool: str) -> str:
    path = find(tool)
    if path is None:
        raise MissingDependency(f"{tool} is not installed; install it with: {INSTALL.get(tool, 'make install')}")
    return path


def version(tool: str) -> str | None:
    path = find(tool)
    if path is None:
        return None
    flag = {"toxiproxy-server": "-version", "etcd": "--version", "nft": "--version", "docker": "--version", "debootstrap": "--version",
            "redis-server": "--version", "redis-sentinel": "--version"}[tool]
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "present"
