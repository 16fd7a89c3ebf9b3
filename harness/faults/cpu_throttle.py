"""cpu-throttle: a CPU quota on a running container, the straggler. Heals by lifting it.

Fail closed: a quota the engine did not apply is no straggler. A zero quota is dropped by the SDK
(it sends `CpuQuota` only when truthy) and an engine without a CPU controller answers 200 with
`Warnings`; so `cpus` must be at least 0.01 and the backend reads the quota back
(DockerBackend.limit_cpu), raising when it is not what was asked: the run is then unknown.
"""
from __future__ import annotations

from pschaos.harness.faults.container import ContainerFault

MIN_CPUS = 0.01      # 1 ms per 100 ms period: the smallest quota the kernel takes is 1 ms


class CpuThrottle(ContainerFault):
    """`cpus`: how many CPUs' worth of time the container may use (0.1: a tenth of one CPU)."""

    kind = "cpu-throttle"
    params_spec = {"cpus": (float, 0.1)}

    @classmethod
    def params_problem(cls, params: dict) -> str | None:
        if params["cpus"] < MIN_CPUS:
            return (f"cpu-throttle: params.cpus={params['cpus']!r} must be >= {MIN_CPUS} (a zero quota is no "
                    "quota: the container would run unthrottled); e.g. cpus: 0.1 for a tenth of one CPU")
        return None

    def act(self, be) -> None:
        self.info["cpu_quota_us"] = be.limit_cpu(self.target, self.params["cpus"])
        self.info["cpus"] = self.params["cpus"]

    def undo(self, be) -> None:
        be.limit_cpu(self.target, None)
