"""Network faults on an adapted system: nftables rules on the peer ports of isolated nodes.

There are no link proxies between another system's nodes (Redis and etcd dial their peers by
the addresses they announce), so a link fault cannot pick one directed link out of many on
loopback. It isolates nodes instead: the node that every cut link touches (`primary(shard=0)
<-> replicas(shard=0)` isolates the primary) loses every packet on its peer ports, both ways,
while clients keep their own way in (a unix socket, a client port), as in a partition that
leaves the old primary reachable to its clients. A target no single node explains is refused
by name, never approximated.
"""
from __future__ import annotations

from netfaults.nft import NftTable, nft

from ..errors import HarnessError

KINDS = ("partition", "loss")


def isolated(links: list[tuple[str, str]]) -> str:
    """The one node every link touches, or a HarnessError naming what to write instead."""
    common = set.intersection(*(set(link) for link in links)) if links else set()
    if len(common) != 1:
        raise HarnessError(f"a link fault on an adapted system isolates one node from its peers; the links "
                           f"{sorted(links)[:4]} have {len(common)} in common. Write the target as "
                           "'primary(shard=0) <-> replicas(shard=0)' (or one node <-> the rest)")
    return common.pop()


def port_matches(ports: list[int]) -> list[str]:
    """nftables matches for every packet to or from these ports (both directions of each flow)."""
    return [f"tcp {d} {p}" for p in ports for d in ("dport", "sport")]


class PortCut:
    """`inject()` drops `percent`% of the packets each match selects, `heal()` removes the rules."""

    def __init__(self, table: NftTable, kind: str, matches: list[str], params: dict) -> None:
        if kind not in KINDS:
            raise HarnessError(f"{kind}: an adapted system takes {' or '.join(KINDS)} as link faults")
        self.table, self.kind, self.matches = table, kind, matches
        self.percent = 100.0 if kind == "partition" else float(params["percent"])
        self.handles: list[int] = []

    def inject(self) -> None:
        if not self.table.created:
            self.table.create()
        before = set(self.table.handles())
        some = "" if self.percent >= 100 else f"numgen random mod 10000 < {int(round(self.percent * 100))} "
        for m in self.matches:
            nft("add", "rule", "inet", self.table.name, "out", *m.split(), *some.split(), "counter", "drop",
                "comment", f'"{self.kind}"')
        self.handles = sorted(set(self.table.handles()) - before)

    def heal(self) -> None:
        self.table.delete(self.handles)
        self.handles = []

    def dropped(self) -> int:
        return self.table.dropped(self.handles)
