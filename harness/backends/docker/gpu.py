"""GPU workers on the engine: `device: cuda` becomes a device request (`docker run --gpus`).

`cluster.gpus` says which: a count (`2`; `-1` every GPU, as `--gpus all`) or device ids
(`["0", "2"]`, or GPU UUIDs). The engine hands GPUs to a container only through a GPU runtime
(NVIDIA's container toolkit registers `nvidia` with dockerd); without one the run fails before
anything starts, naming the fix, unless the scenario said `device: auto`, which trains on the CPU.
"""
from __future__ import annotations

import shutil
from typing import Any

from pschaos.harness.errors import MissingDependency

FIX = ("install NVIDIA's container toolkit (nvidia-container-toolkit) and register it with dockerd "
       "(nvidia-ctk runtime configure --runtime=docker, then restart dockerd), or set cluster.device: auto "
       "to train on the CPU")


def wants_gpu(device: str) -> bool:
    return device == "cuda" or device.startswith("cuda:")


def gpu_runtime(info: dict) -> str | None:
    """The engine's GPU runtime by name (from `docker info`), or None. A host with the legacy
    hook on PATH (nvidia-container-runtime-hook) serves `--gpus` without a named runtime."""
    runtimes = info.get("Runtimes") or {}
    for name in runtimes:
        if "nvidia" in name:
            return name
    return "hook" if shutil.which("nvidia-container-runtime-hook") else None


def device_requests(device: str, gpus: int | list[str] | None) -> list[dict]:
    """The create options' `device_requests` for a worker on `device` (none for the CPU).

    `cuda:1` names device 1 (as torch would); `gpus` overrides with a count or ids. The result is
    the engine API's DeviceRequest: {Driver, Count, DeviceIDs, Capabilities}."""
    if not wants_gpu(device):
        return []
    if gpus is None and device.startswith("cuda:"):
        gpus = [device.split(":", 1)[1]]
    req: dict[str, Any] = {"Driver": "nvidia", "Capabilities": [["gpu"]]}
    if isinstance(gpus, list):
        req["DeviceIDs"] = [str(g) for g in gpus]
    else:
        req["Count"] = -1 if gpus is None else int(gpus)
    return [req]


def worker_requests(device: str, gpus: int | list[str] | None, info: dict) -> tuple[str, list[dict]]:
    """(the `--device` a worker container is given, its device requests).

    `cuda`/`cuda:N` without a GPU runtime raises MissingDependency naming the fix; `auto` asks for
    GPUs where a runtime is present and trains on the CPU elsewhere; anything else is passed on.
    Inside the container the GPUs it was given are numbered from 0, so `cuda:N` becomes `cuda`."""
    runtime = gpu_runtime(info)
    if wants_gpu(device):
        if runtime is None:
            raise MissingDependency(f"cluster.device: {device} asks for GPUs, but the Docker engine has no GPU "
                                    f"runtime (docker info lists runtimes {sorted(info.get('Runtimes') or {})}); "
                                    f"fix: {FIX}")
        return "cuda", device_requests(device, gpus)
    if device == "auto" and runtime is not None:
        return "auto", device_requests("cuda", gpus)
    return device, []
