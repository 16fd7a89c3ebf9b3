"""The link is down: its proxy is disabled (connections closed, new ones refused)."""
from pschaos.netfaults.faults.base import LinkFault


class LinkDown(LinkFault):
    kind = "link-down"

    def inject(self) -> None:
        for p in self.proxies():
            self.ctx.toxiproxy.set_enabled(p, False)

    def heal(self) -> None:
        for p in self.proxies():
            self.ctx.toxiproxy.set_enabled(p, True)
