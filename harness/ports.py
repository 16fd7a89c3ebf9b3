"""Free loopback ports, so that parallel runs (pytest-xdist) never share one.

Ports are drawn at random from *outside* the kernel's ephemeral range: a port that `bind(0)`
handed out and we released could be taken a moment later by any outgoing connection (gRPC,
Toxiproxy) before etcd or a node binds it; ports below the ephemeral range are never used that
way, and a random draw makes two runs picking the same one unlikely.
"""
from __future__ import annotations

import random
import socket

_rng = random.SystemRandom()


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
    lo, hi = _ephemeral()
    pool = range(10000, lo) if lo - 10000 >= 2000 else range(hi + 1, 65536)
    out: list[int] = []
    for _ in range(100 * max(n, 1)):
        p = _rng.choice(pool)
        if p not in out and _bindable(p):
            out.append(p)
            if len(out) == n:
                return out
    raise OSError(f"could not find {n} free loopback ports in {pool.start}-{pool.stop - 1}")
