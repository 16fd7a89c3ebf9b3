"""The Toxiproxy server of a run and its client, on the `toxiproxy-python` package.

One server per run, on its own loopback port and seeded from the run's seed, so parallel runs
never share proxy names and a run's toxics are reproducible. Killing the server removes every
proxy it held, which is how teardown (and `pschaos clean`) undo them all at once.

The package (0.1.1) is the HTTP layer and the models here: `APIConsumer` sends each request and
maps 400/404/409 to its exceptions, `Proxy` and `Toxic` parse what the server returns. What it
lacks for this use and for Toxiproxy 2.12, the wrapper does (measured against toxiproxy-server
2.12.0; docs/internals/client-libraries.md has the evidence):

- Its API is global per process (`APIConsumer.host`/`.port`, set by `update_api_consumer`): two
  runs in one process would send each other's calls to the wrong server. Every call here binds
  this client's host and port under one process-wide lock, for that call only.
- Its calls carry no timeout (a `requests` call without one waits forever): every request here
  passes `timeout=`, which `APIConsumer` forwards to `requests`.
- It maps only 400, 404 and 409; any other error status (a 500) passes as success. Here every
  status >= 400 raises NetFaultError naming the method, path and body.
- `Toxiproxy.create` lists every proxy before each create (O(n) per proxy: 30 links took 1.1 s);
  here a create is one POST, with the package's `Proxy` built from the reply.
- `/version` is JSON on 2.12 (`{"version": "2.12.0"}`); the package returns the raw bytes.
"""
from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import urlsplit

import requests
from toxiproxy import exceptions as tp_errors
from toxiproxy.api import APIConsumer
from toxiproxy.proxy import Proxy as TpProxy
from toxiproxy.toxic import Toxic

from pschaos.netfaults.errors import NetFaultError

_API = threading.Lock()       # guards the package's process-global host and port


@dataclass(frozen=True)
class Proxy:
    name: str
    listen: str      # 127.0.0.1:PORT the source dials
    upstream: str    # the destination's real address

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


class ToxiproxyClient:
    def __init__(self, api: str, timeout: float = 5.0) -> None:
        self.api = api.rstrip("/")
        u = urlsplit(self.api)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 8474
        self.timeout = timeout

    @contextmanager
    def _bound(self) -> Iterator[None]:
        """The package's global consumer pointed at this server, for one call, under the lock."""
        with _API:
            saved = APIConsumer.host, APIConsumer.port
            APIConsumer.host, APIConsumer.port = self.host, self.port
            try:
                yield
            finally:
                APIConsumer.host, APIConsumer.port = saved

    def _req(self, method: str, path: str, body: dict | None = None) -> Any:
        send = {"GET": APIConsumer.get, "POST": APIConsumer.post, "DELETE": APIConsumer.delete}[method]
        kw: dict[str, Any] = {"timeout": self.timeout}
        if body is not None:
            kw["json"] = body
        try:
            with self._bound():
                r = send(path, **kw)
        except requests.RequestException as e:
            raise NetFaultError(f"toxiproxy at {self.api} unreachable: {e.__class__.__name__}") from None
        except (tp_errors.ProxyExists, tp_errors.NotFound, tp_errors.InvalidToxic) as e:
            raise NetFaultError(f"toxiproxy {method} {path}: {e.__class__.__name__} {_text(e.args[0])}") from None
        if r.status_code >= 400:
            raise NetFaultError(f"toxiproxy {method} {path}: HTTP {r.status_code} {r.text.strip()[:200]}")
        return r.json() if r.content else None

    def version(self) -> str:
        """The server's version: `2.12.0` (2.12 answers JSON; older servers plain text)."""
        v = self._req("GET", "/version")
        return v.get("version", "") if isinstance(v, dict) else str(v)

    def healthy(self) -> bool:
        try:
            self.version()
            return True
        except (NetFaultError, ValueError):
            return False

    def create(self, name: str, listen: str, upstream: str) -> Proxy:
        out = self._req("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        p = TpProxy(**out)
        return Proxy(p.name, p.listen, p.upstream)

    def proxies(self) -> dict:
        return self._req("GET", "/proxies") or {}

    def set_enabled(self, name: str, enabled: bool) -> None:
        self._req("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(self, proxy: str, toxic: str, type_: str, attributes: dict, stream: str = "downstream",
                  toxicity: float = 1.0) -> None:
        t = Toxic(name=toxic, type=type_, stream=stream, toxicity=toxicity, attributes=attributes)
        self._req("POST", f"/proxies/{proxy}/toxics", {"name": t.name, "type": t.type, "stream": t.stream,
                                                       "toxicity": t.toxicity, "attributes": t.attributes})

    def remove_toxic(self, proxy: str, toxic: str) -> None:
        try:
            self._req("DELETE", f"/proxies/{proxy}/toxics/{toxic}")
        except NetFaultError as e:
            if "NotFound" not in str(e):
                raise

    def toxics(self, proxy: str) -> list:
        return self._req("GET", f"/proxies/{proxy}/toxics") or []

    def delete(self, name: str) -> None:
        self._req("DELETE", f"/proxies/{name}")


def _text(body: Any) -> str:
    raw = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    try:
        return json.loads(raw).get("error", raw).strip()
    except (ValueError, AttributeError):
        return raw.strip()[:200]


def wait_healthy(client: ToxiproxyClient, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if client.healthy():
            return True
        time.sleep(0.05)
    return False
