"""Added delay on a link, with jitter: a slow or far-away network."""
from pschaos.netfaults.faults.base import REQUIRED, ToxicFault


class Latency(ToxicFault):
    kind = "latency"
    toxic_type = "latency"
    params_spec = {"latency_ms": (int, REQUIRED), "jitter_ms": (int, 0)}

    def attributes(self):
        return {"latency": self.params["latency_ms"], "jitter": self.params["jitter_ms"]}
