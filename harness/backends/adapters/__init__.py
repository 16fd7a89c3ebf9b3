"""Systems under test, by the name a scenario gives in `system:` (default psnodes).

Adding a system: write an Adapter (api.py; docs/adapters.md has a whole example) and either name it
in a scenario by its import path (`system: mypkg.mymodule:MyAdapter`) or add it to ADAPTERS.
Each is imported only when named, so a run of psnodes needs no Redis client.
"""
from __future__ import annotations

from importlib import import_module

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.adapters.api import Adapter, Refused
from pschaos.harness.backends.adapters.system import AdaptedSystem, System

# systems that implement the runner's System protocol themselves (psnodes.py says why psnodes does)
NATIVE: dict[str, str] = {"psnodes": "pschaos.harness.backends.adapters.psnodes:PsnodesSystem"}
ADAPTERS: dict[str, str] = {
    "redis-sentinel": "pschaos.harness.backends.adapters.redis_sentinel:RedisSentinel",
    "etcd": "pschaos.harness.backends.adapters.etcd_cluster:EtcdCluster",
}
SYSTEMS = (*NATIVE, *ADAPTERS)


def import_system(name: str, known: dict[str, str], names: tuple[str, ...]) -> type:
    """The class a system's name (in `known`) or import path (`module:Class`) stands for."""
    module, _, cls = known.get(name, name).partition(":")
    if not cls:
        raise HarnessError(f"system: {name!r} is not a system pschaos knows; use one of {', '.join(names)} "
                           "or an import path, module:Class")
    try:
        return getattr(import_module(module), cls)
    except (ImportError, AttributeError) as e:
        raise HarnessError(f"system: {name!r}: cannot import {cls} from {module}: {e}") from None


def adapter_class(name: str) -> type[Adapter]:
    """The Adapter a name or an import path (`module:Class`) stands for; HarnessError naming the fix."""
    found = import_system(name, ADAPTERS, SYSTEMS)
    if not (isinstance(found, type) and issubclass(found, Adapter)):
        raise HarnessError(f"system: {name!r} is not an Adapter subclass (pschaos.harness.backends.adapters.Adapter)")
    return found


def system_named(name: str) -> System:
    """The System a scenario's `system:` names: a native one, or an Adapter made into one."""
    if name in NATIVE:
        module, _, cls = NATIVE[name].partition(":")
        return getattr(import_module(module), cls)()
    return AdaptedSystem(adapter_class(name))


__all__ = ["ADAPTERS", "SYSTEMS", "Adapter", "Refused", "System", "adapter_class", "system_named"]
