"""A network fault from netfaults, on the links a target resolves to."""
from __future__ import annotations

from pschaos.harness.errors import HarnessError
from pschaos.harness.faults.targets import resolve_links
from pschaos.harness.faults.base import Fault


class LinkFaultAdapter(Fault):
    kind = "link"

    def prepare(self) -> None:
        """Resolve the links, build the fault (a loss or partition makes the run's nft table then)
        and note a cut primary, all before the runner takes the start time: the cut itself is
        then one nft transaction or one toxic call after it (review of session 24, H1: the table
        and the routing read fell between the recorded start and the cut, some 40 ms loaded)."""
        if getattr(self, "impl", None) is not None:
            return
        be = self.ctx.backend
        if be.links() is None:
            raise HarnessError(f"{self.info['kind']}: the cluster runs without link proxies; "
                               "set cluster.network: proxied (auto does so when the schedule has link faults)")
        links, ga, gb = resolve_links(self.target, be, self.ctx.rng)
        self.impl = be.link_fault(self.info["kind"], links, self.params)
        self.info.update(links=[f"{a}->{b}" for a, b in links], groups=[ga, gb])
        routes = be.routing()
        cut = [n for n in ga if n.startswith("shard-") and any(r.primary == n for r in routes.values())]
        if self.info["kind"] in ("partition", "link-down") and cut:
            # a primary on the cut side: record it, so `stops-acking` can judge what it does next
            rec = next(r for r in routes.values() if r.primary == cut[0])
            self.info["isolated_primary"] = {"node": cut[0], "epoch": rec.epoch,
                                             "shard": int(cut[0].split("-")[1].split("/")[0])}

    def inject(self) -> None:
        self.prepare()
        self.impl.inject()

    def heal(self) -> None:
        impl = getattr(self, "impl", None)
        if impl is not None:
            try:
                if hasattr(impl, "dropped"):
                    self.info["packets_dropped"] = impl.dropped()
                if hasattr(impl, "evidence"):         # did the cut bite: the cut node's own progress
                    self.info["evidence"] = impl.evidence()
            finally:
                impl.heal()                           # a failed counter read never leaves the cut in place
