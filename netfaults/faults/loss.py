"""Packet loss with a given probability on links, by nftables rules on their proxy ports."""
from .base import REQUIRED, LinkFault
from ..errors import NetFaultError


class Loss(LinkFault):
    kind = "loss"
    params_spec = {"percent": (float, REQUIRED)}

    def __init__(self, ctx, links, params):
        super().__init__(ctx, links, params)
        if not 0 < self.params["percent"] <= 100:
            raise NetFaultError(f"loss: params.percent={self.params['percent']} must be within (0, 100]")
        self.handles: list[int] = []

    def inject(self) -> None:
        self.handles = self.ctx.nft.add_drop(self.ports(), self.params["percent"], self.kind)

    def heal(self) -> None:
        self.ctx.nft.delete(self.handles)
        self.handles = []

    def dropped(self) -> int:
        return self.ctx.nft.dropped(self.handles)
