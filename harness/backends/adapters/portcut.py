"""Network faults on an adapted system: nftables rules on the peer ports of isolated nodes.

There are no link proxies between another system's nodes (Redis and etcd dial their peers by
the addresses they announce), so a link fault cannot pick one directed link out of many on
loopback. It cuts the node that every cut link touches (`primary(shard=0) <-> replicas(shard=0)`
cuts the primary): every packet to or from its peer ports is dropped, while clients keep their
own way in (a unix socket, a client port). A target no single node explains is refused by name,
never approximated.

What that cuts depends on who dials whom. Every connection to the node's peer port dies, so a
system whose peers dial the node (Redis: replicas and Sentinels dial the master) loses the node
whole. A connection the node itself opened to a peer's port is not on its port and survives: in
etcd 3.4 each member receives a peer's raft messages on the stream it dialed to that peer, so a
cut etcd leader still hears its followers while they no longer hear it: a one-way cut of its peer
port, not isolation (all traffic stays on 127.0.0.1, where no rule can tell the leader's outgoing
connections from another member's by address). The evidence says what the cut did: at its start
and before its heal the node's own progress (term, raft index, whether it thinks it leads) and the
group's (term, primary), in `fault-stop`'s `evidence`.
"""
from __future__ import annotations

from typing import Callable

from pschaos.netfaults.nft import NftTable, nft

from pschaos.harness.errors import HarnessError

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

    def __init__(self, table: NftTable, kind: str, matches: list[str], params: dict,
                 probe: Callable[[], dict] | None = None) -> None:
        if kind not in KINDS:
            raise HarnessError(f"{kind}: an adapted system takes {' or '.join(KINDS)} as link faults")
        self.table, self.kind, self.matches = table, kind, matches
        self.percent = 100.0 if kind == "partition" else float(params["percent"])
        self.handles: list[int] = []
        self.probe, self.before, self.after = probe, None, None

    def inject(self) -> None:
        if self.probe is not None:
            self.before = self.probe()
        if not self.table.created:
            self.table.create()
        before = set(self.table.handles())
        some = "" if self.percent >= 100 else f"numgen random mod 10000 < {int(round(self.percent * 100))} "
        for m in self.matches:
            nft("add", "rule", "inet", self.table.name, "out", *m.split(), *some.split(), "counter", "drop",
                "comment", f'"{self.kind}"')
        self.handles = sorted(set(self.table.handles()) - before)

    def heal(self) -> None:
        if self.probe is not None and self.handles and self.after is None:
            self.after = self.probe()         # still cut: what the fault did, before it is undone
        self.table.delete(self.handles)
        self.handles = []

    def evidence(self) -> dict:
        """The cut node's progress and the group's view at the cut's start and end, and what they
        show: a higher term with another primary (a new leader was elected) and whether the cut
        node's log still grew (its raft index or replication offset). Read while the cut is in
        place (the link fault asks before it heals)."""
        if self.probe is not None and self.handles and self.after is None:
            self.after = self.probe()
        out: dict = {"before": self.before, "after": self.after}
        b, a = self.before or {}, self.after or {}
        bv, av = b.get("view"), a.get("view")
        if isinstance(bv, (list, tuple)) and isinstance(av, (list, tuple)):
            out["new_primary_elected"] = av[0] > bv[0] and av[1] not in (None, b.get("node"))
        bp, ap = b.get("progress"), a.get("progress")
        if isinstance(bp, dict) and isinstance(ap, dict) and "error" not in bp and "error" not in ap:
            pos = "index" if "index" in bp else "offset" if "offset" in bp else None
            if pos:
                out["cut_node_advanced"] = ap.get(pos, 0) > bp.get(pos, 0)
        return out

    def dropped(self) -> int:
        return self.table.dropped(self.handles)
