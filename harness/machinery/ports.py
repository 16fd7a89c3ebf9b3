"""Free loopback ports, so that parallel runs (pytest-xdist) never share one.

Ports are drawn at random from *outside* the kernel's ephemeral range: a port that `bind(0)`
handed out and we released could be taken a moment later by any outgoing connection (gRPC,
Toxiproxy) before etcd or a node binds it; ports below the ephemeral range are never used that
way. Two runs on the same machine (pytest-xdist) could still draw the same port before either
binds it, so each pick is also reserved by creating a file in a shared folder: a port
reserved in the last ten minutes is never handed out again.
"""
from __future__ import annotations

import os
import random
import socket
import tempfile
import time
from pathlib import Path

_rng = random.SystemRandom()
RESERVED = Path(os.environ.get("PSCHAOS_PORTS_DIR", Path(tempfile.gettempdir()) / "pschaos-ports"))
HOLD_S = 600.0


def _prune() -> None:
    """Forget claims older than HOLD_S, so the folder stays small."""
    now = time.time()
    for f in RESERVED.glob("*") if RESERVED.exists() else []:
        try:
            if now - f.stat().st_mtime > HOLD_S:
                f.unlink()
        except FileNotFoundError:
            pass


def _reserve(port: int) -> bool:
    """Claim `port` for this run unless another claimed it within HOLD_S (atomic create)."""
    RESERVED.mkdir(parents=True, exist_ok=True)
    path = RESERVED / str(port)
    try:
        if time.time() - path.stat().st_mtime > HOLD_S:
            path.unlink(missing_ok=True)              # a stale claim: free to take again
    except FileNotFoundError:
        pass
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except FileExistsError:
        return False


def _ephemeral() -> tuple[int, int]:
    try:
        lo, hi = open("/proc/sys/net/ipv4/ip_local_port_range").read().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports(n: int) -> list[int]:
    """`n` distinct ports, free on 127.0.0.1 now, outside the ephemeral range."""
    _prune()
    lo, hi = _ephemeral()
    pool = range(10000, lo) if lo - 10000 >= 2000 else range(hi + 1, 65536)
    out: list[int] = []
    for _ in range(100 * max(n, 1)):
        p = _rng.choice(pool)
        if p not in out and _bindable(p) and _reserve(p):
            out.append(p)
            if len(out) == n:
                return out
    raise OSError(f"could not find {n} free loopback ports in {pool.start}-{pool.stop - 1}")
