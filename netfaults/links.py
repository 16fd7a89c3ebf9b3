"""Every directed link A->B of a cluster as its own Toxiproxy proxy.

Link maps are what psnodes processes dial by: the map of process A sends its traffic for B to
the listen address of the proxy of A->B. Faults then address links by (source, destination)
name pairs, and packet rules by the proxy's port.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pschaos.netfaults.toxiproxy import Proxy, ToxiproxyClient


def proxy_name(run_id: str, src: str, dst: str) -> str:
    """URL-safe and unique per run: `<run>.<src>.to.<dst>` with '/' as '_'."""
    return f"{run_id}.{src}.to.{dst}".replace("/", "_")


@dataclass
class LinkTable:
    run_id: str
    links: dict[tuple[str, str], Proxy] = field(default_factory=dict)

    def build(self, client: ToxiproxyClient, pairs: list[tuple[str, str]], addresses: dict[str, str]) -> None:
        for src, dst in pairs:
            self.links[(src, dst)] = client.create(proxy_name(self.run_id, src, dst), "127.0.0.1:0", addresses[dst])

    def map_for(self, src: str) -> dict[str, str]:
        """The link map of process `src`: destination name -> proxy listen address."""
        return {dst: p.listen for (s, dst), p in self.links.items() if s == src}

    def select(self, srcs: set[str], dsts: set[str]) -> list[tuple[str, str]]:
        return sorted(k for k in self.links if k[0] in srcs and k[1] in dsts)
