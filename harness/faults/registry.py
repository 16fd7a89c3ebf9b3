"""Fault kinds by name, parameter checks for the scenario schema, and construction."""
from __future__ import annotations

from pschaos.netfaults.errors import NetFaultError
from pschaos.netfaults.faults import LINK_FAULTS
from pschaos.netfaults.faults.base import ToxicFault, check_params

from pschaos.harness.faults.base import Fault, FaultContext
from pschaos.harness.faults.cpu_throttle import CpuThrottle
from pschaos.harness.faults.disk_full import DiskFull
from pschaos.harness.faults.flap import Flap
from pschaos.harness.faults.link import LinkFaultAdapter
from pschaos.harness.faults.memory_limit import MemoryLimit
from pschaos.harness.faults.process import Kill, Pause, Restart, Stop
from pschaos.harness.faults.scale import ScaleIn, ScaleOut
from pschaos.harness.faults.shards import ScaleInShards, ScaleOutShards
from pschaos.harness.faults.storage import BitRot, PowerLoss, TornWrite

PROCESS: dict[str, type[Fault]] = {c.kind: c for c in (Kill, Stop, Restart, Pause, Flap, ScaleOut, ScaleIn,
                                                        CpuThrottle, MemoryLimit, DiskFull, ScaleOutShards,
                                                        ScaleInShards, PowerLoss, TornWrite, BitRot)}
PROCESS_KINDS = tuple(PROCESS)
LINK_KINDS = tuple(LINK_FAULTS)
ALL_KINDS = PROCESS_KINDS + LINK_KINDS
NO_TARGET = ("scale-out", "scale-in", "scale-out-shards", "scale-in-shards")


def params_error(kind: str, params: dict) -> str | None:
    """Why `params` do not fit `kind`, or None."""
    try:
        if kind in PROCESS:
            problem = PROCESS[kind].params_problem(check_params(kind, PROCESS[kind].params_spec, params))
            if problem:
                return problem
        else:
            cls = LINK_FAULTS[kind]
            spec = dict(cls.params_spec)
            if issubclass(cls, ToxicFault):
                spec.update(ToxicFault.common)
            check_params(kind, spec, params)
    except NetFaultError as e:
        return str(e)
    return None


def build(kind: str, ctx: FaultContext, target: str, params: dict) -> Fault:
    if kind in PROCESS:
        cls = PROCESS[kind]
        checked = check_params(kind, cls.params_spec, params)
        problem = cls.params_problem(checked)
        if problem:
            raise NetFaultError(problem)
        return cls(ctx, target, checked, {"kind": kind})
    return LinkFaultAdapter(ctx, target, dict(params), {"kind": kind})
