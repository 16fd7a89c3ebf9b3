"""Schedule search: random fault schedules against a cluster, and shrinking of the ones that fail."""
from pschaos.harness.proof.hunt.hunt import SAFETY, HuntResult, hunt, hunt_scenario
from pschaos.harness.proof.hunt.shrink import Shrunk, shrink
from pschaos.harness.proof.hunt.space import DEFAULT_KINDS, FaultSpace, make_fault

__all__ = ["DEFAULT_KINDS", "FaultSpace", "HuntResult", "SAFETY", "Shrunk", "hunt", "hunt_scenario", "make_fault",
           "shrink"]
