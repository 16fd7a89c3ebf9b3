"""Data sliced into small segments with a delay between them: fragmentation."""
from pschaos.netfaults.faults.base import REQUIRED, ToxicFault


class Slicer(ToxicFault):
    kind = "slicer"
    toxic_type = "slicer"
    params_spec = {"average_size": (int, REQUIRED), "size_variation": (int, 0), "delay_us": (int, 0)}

    def attributes(self):
        return {"average_size": self.params["average_size"], "size_variation": self.params["size_variation"],
                "delay": self.params["delay_us"]}
