"""A bandwidth cap on a link, in KB/s."""
from pschaos.netfaults.faults.base import REQUIRED, ToxicFault


class Bandwidth(ToxicFault):
    kind = "bandwidth"
    toxic_type = "bandwidth"
    params_spec = {"rate_kbps": (int, REQUIRED)}

    def attributes(self):
        return {"rate": self.params["rate_kbps"]}
