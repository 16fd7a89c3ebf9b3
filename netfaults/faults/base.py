"""What every network fault shares: its links, its parameters, inject and heal.

A fault names the directed links it acts on; the machinery here checks its parameters (clear
errors naming the field), and subclasses only say what to add and what to take away.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from pschaos.netfaults.errors import NetFaultError
from pschaos.netfaults.links import LinkTable
from pschaos.netfaults.nft import NftTable
from pschaos.netfaults.toxiproxy import ToxiproxyClient

REQUIRED = object()
LINK_FAULTS: dict[str, type["LinkFault"]] = {}


@dataclass
class NetContext:
    toxiproxy: ToxiproxyClient
    links: LinkTable
    nft: NftTable


def check_params(kind: str, spec: dict[str, tuple[type, Any]], given: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and check types; raise NetFaultError naming `params.<field>` and the fix."""
    unknown = sorted(set(given) - set(spec))
    if unknown:
        raise NetFaultError(f"{kind}: unknown params {', '.join(unknown)}; known: {', '.join(sorted(spec)) or 'none'}")
    out = {}
    for name, (typ, default) in spec.items():
        if name not in given:
            if default is REQUIRED:
                raise NetFaultError(f"{kind}: params.{name} is required ({typ.__name__})")
            out[name] = default
            continue
        v = given[name]
        if typ is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not isinstance(v, typ) or isinstance(v, bool) and typ is not bool:
            raise NetFaultError(f"{kind}: params.{name}={v!r} must be a {typ.__name__}")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
            raise NetFaultError(f"{kind}: params.{name}={v!r} must be >= 0")
        out[name] = v
    return out


class LinkFault:
    kind: ClassVar[str] = ""
    params_spec: ClassVar[dict[str, tuple[type, Any]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.kind:
            LINK_FAULTS[cls.kind] = cls

    def __init__(self, ctx: NetContext, links: list[tuple[str, str]], params: dict[str, Any]) -> None:
        if not links:
            raise NetFaultError(f"{self.kind}: the target names no link of this cluster")
        self.ctx, self.links = ctx, links
        self.params = check_params(self.kind, self.params_spec, params)

    def proxies(self) -> list[str]:
        return [self.ctx.links.links[link].name for link in self.links]

    def ports(self) -> list[int]:
        return [self.ctx.links.links[link].port for link in self.links]

    def inject(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        raise NotImplementedError


class ToxicFault(LinkFault):
    """A Toxiproxy toxic on each link's proxy; `stream` picks request (upstream), reply
    (downstream) or both directions."""

    toxic_type: ClassVar[str] = ""
    common = {"stream": (str, "upstream"), "toxicity": (float, 1.0)}

    def __init__(self, ctx: NetContext, links: list[tuple[str, str]], params: dict[str, Any]) -> None:
        self.params_spec = {**self.params_spec, **self.common}
        super().__init__(ctx, links, params)
        if self.params["stream"] not in ("upstream", "downstream", "both"):
            raise NetFaultError(f"{self.kind}: params.stream={self.params['stream']!r}; use upstream, downstream or both")
        if not 0 <= self.params["toxicity"] <= 1:
            raise NetFaultError(f"{self.kind}: params.toxicity={self.params['toxicity']} must be within [0, 1]")
        self.added: list[tuple[str, str]] = []

    def attributes(self) -> dict[str, Any]:
        raise NotImplementedError

    def streams(self) -> list[str]:
        s = self.params["stream"]
        return ["upstream", "downstream"] if s == "both" else [s]

    def inject(self) -> None:
        for proxy in self.proxies():
            for stream in self.streams():
                name = f"{self.kind}_{stream}"
                self.ctx.toxiproxy.add_toxic(proxy, name, self.toxic_type, self.attributes(), stream,
                                             self.params["toxicity"])
                self.added.append((proxy, name))

    def heal(self) -> None:
        for proxy, name in self.added:
            self.ctx.toxiproxy.remove_toxic(proxy, name)
        self.added = []
