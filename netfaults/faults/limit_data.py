"""Connections close after a number of bytes: a flaky middlebox."""
from pschaos.netfaults.faults.base import REQUIRED, ToxicFault


class LimitData(ToxicFault):
    kind = "limit_data"
    toxic_type = "limit_data"
    params_spec = {"bytes": (int, REQUIRED)}

    def attributes(self):
        return {"bytes": self.params["bytes"]}
