"""Every system a scenario's `system:` can name: psnodes, an adapter, or a training job.

Adapters (adapters/) drive a store with the harness's workload; training jobs (jobs/) train by
themselves and are judged from their shim's records. Each is imported only when named, so a
run of psnodes needs neither a Redis client nor torchrun.
"""
from __future__ import annotations

from importlib import import_module

from pschaos.harness.backends.adapters import ADAPTERS, NATIVE, Adapter, AdaptedSystem, System, import_system
from pschaos.harness.backends.jobs import JOBS
from pschaos.harness.backends.jobs.api import TrainingJob
from pschaos.harness.errors import HarnessError

SYSTEMS = (*NATIVE, *ADAPTERS, *JOBS)


def system_class(name: str) -> type[Adapter] | type[TrainingJob]:
    """The Adapter or TrainingJob a name or an import path (`module:Class`) stands for."""
    found = import_system(name, {**ADAPTERS, **JOBS}, SYSTEMS)
    if not (isinstance(found, type) and issubclass(found, (Adapter, TrainingJob))):
        raise HarnessError(f"system: {name!r} is neither an Adapter (pschaos.harness.backends.adapters.Adapter) nor "
                           "a TrainingJob (pschaos.harness.backends.jobs.api.TrainingJob)")
    return found


def is_job(name: str) -> bool:
    return name not in NATIVE and issubclass(system_class(name), TrainingJob)


def system_named(name: str) -> System:
    """The System a scenario's `system:` names: a native one, an Adapter or a TrainingJob."""
    if name in NATIVE:
        module, _, cls = NATIVE[name].partition(":")
        return getattr(import_module(module), cls)()
    found = system_class(name)
    if issubclass(found, TrainingJob):
        from pschaos.harness.backends.jobs.system import JobSystem

        return JobSystem(found)
    return AdaptedSystem(found)
