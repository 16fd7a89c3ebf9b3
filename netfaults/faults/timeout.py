"""A black hole: data stops; the connection closes after timeout_ms (0: never)."""
from pschaos.netfaults.faults.base import ToxicFault


class Timeout(ToxicFault):
    kind = "timeout"
    toxic_type = "timeout"
    params_spec = {"timeout_ms": (int, 0)}

    def attributes(self):
        return {"timeout": self.params["timeout_ms"]}
