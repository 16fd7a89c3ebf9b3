"""TCP resets: connections are reset (RST) after timeout_ms."""
from pschaos.netfaults.faults.base import ToxicFault


class ResetPeer(ToxicFault):
    kind = "reset_peer"
    toxic_type = "reset_peer"
    params_spec = {"timeout_ms": (int, 0)}

    def attributes(self):
        return {"timeout": self.params["timeout_ms"]}
