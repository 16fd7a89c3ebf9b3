"""HTTP/1.1 keep-alive connections to one etcd JSON gateway, for psnodes/etcd.py.

Every node renews its lease three times a second and every client reads shard records while it
waits for a deposed primary, so an etcd call's own cost counts: through `requests` it took
1.2 ms of client CPU, through http.client 0.22 ms (docs/measurements/suite-time.md). This keeps
what `requests` gave the client and nothing more: a pool of idle connections (one per thread
calling at once), a per-call timeout on connect and on each read, a connection the server closed
while idle never reused (checked before each reuse, as urllib3 does), and no retries (a POST
that reached etcd is never sent twice: a repeated transaction would answer for the wrong try).
Failures are named as `requests` named them (ConnectionError, ConnectTimeout, ReadTimeout),
which the twin's etcd and the logs use too.
"""
from __future__ import annotations

import http.client
import select
import socket
import threading
from urllib.parse import urlsplit

HEADERS = {"Content-Type": "application/json"}


class _Connection(http.client.HTTPConnection):
    """TCP_NODELAY, as urllib3 (under `requests`) sets it: http.client sends a request's headers
    and its body in two writes, and with Nagle's algorithm the body waits for the ACK of the
    headers, which a server's delayed ACK can hold for 40 ms."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class GatewayError(Exception):
    """The gateway could not be reached or did not answer in time; `kind` names how."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class GatewayHTTP:
    def __init__(self, endpoint: str) -> None:
        u = urlsplit(endpoint)
        # an endpoint that is not http://HOST[:PORT] fails each call as unreachable (InvalidURL),
        # as `requests` did: the caller's EtcdError names the endpoint (pschaos's etcd is plain
        # HTTP on loopback: no TLS)
        try:
            port = u.port or 80
        except ValueError:            # not a number, or out of range
            port = 0
        self.valid = u.scheme == "http" and bool(u.hostname) and port > 0
        self.host, self.port = u.hostname or "", port
        self.prefix = u.path.rstrip("/")
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def post(self, path: str, body: bytes, timeout: float) -> tuple[int, bytes]:
        """POST `body` to `path`; the status and the body of the reply. GatewayError when the
        gateway is unreachable or a connect or a read took longer than `timeout`."""
        if not self.valid:
            raise GatewayError("InvalidURL")
        conn = self._take()
        connected = False
        try:
            if conn.sock is None:
                conn.timeout = timeout
            else:
                conn.sock.settimeout(timeout)
            conn.request("POST", self.prefix + path, body=body, headers=HEADERS)
            connected = True          # sent: what fails from here on is the read
            reply = conn.getresponse()
            data = reply.read()
        except BaseException as e:
            conn.close()
            if isinstance(e, (socket.timeout, TimeoutError)):
                raise GatewayError("ReadTimeout" if connected else "ConnectTimeout") from None
            if isinstance(e, (OSError, http.client.HTTPException)):
                raise GatewayError("ConnectionError") from None
            raise
        if reply.will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        return reply.status, data

    def _take(self) -> _Connection:
        """An idle connection the server has not closed, else a new one (connected on use)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return _Connection(self.host, self.port)
            if not _dropped(conn):
                return conn
            conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _dropped(conn: http.client.HTTPConnection) -> bool:
    """An idle keep-alive socket that reads as ready has been closed by the server (or holds
    bytes nobody asked for): either way it must not carry the next request."""
    if conn.sock is None:
        return True
    try:
        poller = select.poll()            # not select(): a process may hold descriptors past 1024
        poller.register(conn.sock, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


__all__ = ["GatewayError", "GatewayHTTP"]
