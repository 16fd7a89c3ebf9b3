"""The connection to the Docker engine, through the Docker SDK for Python (`docker`).

One place answers "is there an engine, which version, and if not, what is the fix", so the
backend, `pschaos doctor`, `pschaos clean` and the tests say the same thing. The SDK is imported
here only, lazily: the process and sim backends need neither it nor an engine.
"""
from __future__ import annotations

from typing import Any

from ..errors import MissingDependency

FIX = ".ci/docker-engine   (or: make docker-engine; installs docker.io and starts dockerd)"
LABEL_RUN = "pschaos.run"          # every container, volume and run image carries the run id here
LABEL_KIND = "pschaos.kind"        # what it is: node, worker, etcd, toxiproxy, holder, data, base-image


def sdk() -> Any:
    """The `docker` module, or MissingDependency naming the install command."""
    try:
        import docker
    except ImportError:
        raise MissingDependency("the Docker SDK for Python is not installed; install it with: "
                                ".venv/bin/pip install docker   (or: make install)") from None
    return docker


def client(timeout: float = 30.0) -> Any:
    """A DockerClient that answered a ping; MissingDependency (exit 2) with the fix otherwise."""
    docker = sdk()
    try:
        c = docker.from_env(timeout=int(timeout))
        c.ping()
        return c
    except docker.errors.DockerException as e:
        raise MissingDependency(f"no Docker engine answers ({e.__class__.__name__}: {e}); start one with: {FIX}") \
            from None


def server_version() -> tuple[str | None, str | None]:
    """(the engine's version from its API, None) or (None, why not and the fix)."""
    try:
        c = client(timeout=5)
    except MissingDependency as e:
        return None, str(e)
    try:
        v = c.version()
        return f"{v.get('Version')} (API {v.get('ApiVersion')})", None
    finally:
        c.close()


def available() -> str | None:
    """None when an engine answers; otherwise why not (for skips and refusals)."""
    return server_version()[1]
