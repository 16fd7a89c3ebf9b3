"""Packet loss with a given probability on links, by nftables rules on their proxy ports."""
from pschaos.netfaults.faults.base import REQUIRED, LinkFault
from pschaos.netfaults.errors import NetFaultError


class Loss(LinkFault):
    kind = "loss"
    params_spec = {"percent": (float, REQUIRED)}

    def __init__(self, ctx, links, params):
        super().__init__(ctx, links, params)
        if not 0 < self.params["percent"] <= 100:
            raise NetFaultError(f"loss: params.percent={self.params['percent']} must be within (0, 100]")
        self.handles: list[int] = []
        self.table_ready()

    def table_ready(self) -> None:
        """The run's table now, when the fault is built and before its start is taken: inject is
        then one nft transaction, and the links are cut within one `nft` call of the recorded
        start (the table's own call made partition-primary-replicas' replicas hear their primary
        some 40 ms past it on a loaded machine)."""
        nft = getattr(self.ctx, "nft", None)       # None: the SimPy twin's faults (no kernel rules)
        if nft is not None and not nft.created:
            nft.create()

    def inject(self) -> None:
        self.handles = self.ctx.nft.add_drop(self.ports(), self.params["percent"], self.kind)

    def heal(self) -> None:
        self.ctx.nft.delete(self.handles)
        self.handles = []

    def dropped(self) -> int:
        return self.ctx.nft.dropped(self.handles)
