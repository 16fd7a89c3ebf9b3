"""The Toxiproxy server of a run and a small client for its HTTP API.

One server per run, on its own loopback port and seeded from the run's seed, so parallel runs
never share proxy names and a run's toxics are reproducible. Killing the server removes every
proxy it held, which is how teardown (and `pschaos clean`) undo them all at once.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import requests

from .errors import NetFaultError


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
        self.http = requests.Session()
        self.timeout = timeout

    def _req(self, method: str, path: str, body: dict | None = None) -> dict | list | None:
        try:
            r = self.http.request(method, self.api + path, json=body, timeout=self.timeout)
        except requests.RequestException as e:
            raise NetFaultError(f"toxiproxy at {self.api} unreachable: {e.__class__.__name__}") from None
        if r.status_code >= 400:
            raise NetFaultError(f"toxiproxy {method} {path}: HTTP {r.status_code} {r.text.strip()[:200]}")
        return r.json() if r.content else None

    def version(self) -> str:
        r = self.http.get(self.api + "/version", timeout=self.timeout)
        return r.text.strip()

    def healthy(self) -> bool:
        try:
            self.version()
            return True
        except requests.RequestException:
            return False

    def create(self, name: str, listen: str, upstream: str) -> Proxy:
        out = self._req("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": True})
        return Proxy(name, out["listen"], upstream)

    def proxies(self) -> dict:
        return self._req("GET", "/proxies") or {}

    def set_enabled(self, name: str, enabled: bool) -> None:
        self._req("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(self, proxy: str, toxic: str, type_: str, attributes: dict, stream: str = "downstream",
                  toxicity: float = 1.0) -> None:
        self._req("POST", f"/proxies/{proxy}/toxics", {"name": toxic, "type": type_, "stream": stream,
                                                       "toxicity": toxicity, "attributes": attributes})

    def remove_toxic(self, proxy: str, toxic: str) -> None:
        try:
            self._req("DELETE", f"/proxies/{proxy}/toxics/{toxic}")
        except NetFaultError as e:
            if "404" not in str(e):
                raise

    def toxics(self, proxy: str) -> list:
        return self._req("GET", f"/proxies/{proxy}/toxics") or []

    def delete(self, name: str) -> None:
        self._req("DELETE", f"/proxies/{name}")


def wait_healthy(client: ToxiproxyClient, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if client.healthy():
            return True
        time.sleep(0.05)
    return False
