"""Free loopback ports, so that parallel runs (pytest-xdist) never share one."""
from __future__ import annotations

import socket


def free_ports(n: int) -> list[int]:
    """`n` distinct ports that were free on 127.0.0.1 a moment ago (sockets held until all are picked)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
