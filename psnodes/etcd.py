"""A small client for etcd's JSON gateway, `/v3/` (etcd 3.4 serves it beside the deprecated
`/v3beta/`; 3.5 and later serve only `/v3/`).

Only what the cluster needs: get, put, delete, compare-and-swap transactions and leases, each
with a short timeout, because failover time depends on how fast a dead control plane is noticed.
The gRPC `etcd3` client breaks on current protobuf; the gateway needs only HTTP.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from pschaos.psnodes.errors import PSError
from pschaos.psnodes.gateway_http import GatewayError, GatewayHTTP


class EtcdError(PSError):
    """etcd could not be reached or refused the request."""


def _b64(s: str | bytes) -> str:
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def _unb64(s: str) -> bytes:
    return base64.b64decode(s) if s else b""


def _prefix_end(prefix: str) -> str:
    b = bytearray(prefix.encode())
    b[-1] += 1
    return _b64(bytes(b))


@dataclass(frozen=True)
class KV:
    key: str
    value: bytes
    mod_revision: int
    lease: int


class Etcd:
    def __init__(self, endpoint: str, timeout: float = 1.0, api: str = "/v3") -> None:
        self.base = endpoint.rstrip("/") + api
        self.endpoint = endpoint
        self.api = api
        self.timeout = timeout
        self.http = GatewayHTTP(endpoint)

    def close(self) -> None:
        """Close the idle connections (a later call opens a new one)."""
        self.http.close()

    def _call(self, path: str, body: dict, timeout: float | None = None) -> dict:
        try:
            status, data = self.http.post(self.api + path, json.dumps(body).encode(), timeout or self.timeout)
        except GatewayError as e:
            raise EtcdError(f"etcd at {self.endpoint} unreachable: {e.kind}") from None
        try:
            out = json.loads(data)
        except ValueError:          # not the gateway's JSON: another server, or an etcd without /v3/
            raise EtcdError(f"etcd at {self.endpoint}: {self.base + path} answered HTTP {status} "
                            f"{data.decode(errors='replace')[:120]!r}, not etcd's JSON gateway; pschaos needs etcd 3.4 or later "
                            "(`pschaos doctor` checks the version)") from None
        if not isinstance(out, dict):
            raise EtcdError(f"etcd {path}: the reply is not a JSON object: {str(out)[:120]!r}")
        if "error" in out:
            raise EtcdError(f"etcd {path}: {out.get('message') or out['error']}")
        return out

    @staticmethod
    def _kv(d: dict) -> KV:
        return KV(_unb64(d["key"]).decode(), _unb64(d.get("value", "")),
                  int(d.get("mod_revision", 0)), int(d.get("lease", 0)))

    def get(self, key: str, serializable: bool = False) -> KV | None:
        """The key's value (None: absent). `serializable`: answered by the member at hand from its
        own store, without the quorum round of a linearizable read (cheaper; it may lag a moment)."""
        body: dict[str, Any] = {"key": _b64(key)}
        if serializable:
            body["serializable"] = True
        kvs = self._call("/kv/range", body).get("kvs", [])
        return self._kv(kvs[0]) if kvs else None

    def get_prefix(self, prefix: str) -> list[KV]:
        out = self._call("/kv/range", {"key": _b64(prefix), "range_end": _prefix_end(prefix)})
        return [self._kv(d) for d in out.get("kvs", [])]

    def put(self, key: str, value: str | bytes, lease: int = 0) -> None:
        body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = str(lease)
        self._call("/kv/put", body)

    def delete(self, key: str) -> None:
        self._call("/kv/deleterange", {"key": _b64(key)})

    def cas(self, key: str, expect_mod_revision: int, value: str | bytes, lease: int = 0,
            also_put: list[tuple[str, str | bytes, int]] = (),
            also_compare: list[tuple[str, int]] = (), also_delete: list[str] = ()) -> bool:
        """Put `value` iff the key's mod revision is `expect_mod_revision` (0: the key is absent),
        and each (key, mod revision) of `also_compare` still holds, all in one transaction (with
        the puts of `also_put` and the deletes of `also_delete`)."""
        put = {"key": _b64(key), "value": _b64(value)}
        if lease:
            put["lease"] = str(lease)
        ops = [{"request_put": put}]
        for k, v, l in also_put:
            p = {"key": _b64(k), "value": _b64(v)}
            if l:
                p["lease"] = str(l)
            ops.append({"request_put": p})
        ops += [{"request_delete_range": {"key": _b64(k)}} for k in also_delete]
        cmps = [{"key": _b64(k), "target": "MOD", "result": "EQUAL", "mod_revision": str(rev)}
                for k, rev in [(key, expect_mod_revision), *also_compare]]
        return bool(self._call("/kv/txn", {"compare": cmps, "success": ops}).get("succeeded", False))

    def grant(self, ttl: int, timeout: float | None = None) -> int:
        return int(self._call("/lease/grant", {"TTL": ttl}, timeout)["ID"])

    def keepalive(self, lease: int, timeout: float | None = None) -> int:
        """Refresh a lease; returns the TTL left (0 or less: the lease is gone)."""
        out = self._call("/lease/keepalive", {"ID": str(lease)}, timeout)
        return int(out.get("result", {}).get("TTL", 0))

    def revoke(self, lease: int) -> None:
        try:
            self._call("/kv/lease/revoke", {"ID": str(lease)})
        except EtcdError:
            pass

    def healthy(self) -> bool:
        try:
            self._call("/kv/range", {"key": _b64("/health-probe")}, timeout=0.5)
            return True
        except (EtcdError, ValueError):
            return False
