"""The connection to the Docker engine, through the Docker SDK for Python (`docker`).

One place answers "is there an engine, which version, and if not, what is the fix", so the
backend, `pschaos doctor`, `pschaos clean` and the tests say the same thing. The SDK is imported
here only, lazily: the process and sim backends need neither it nor an engine.
"""
from __future__ import annotations

import os
from typing import Any

from pschaos.harness.errors import MissingDependency

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


RULE_FIX = ('write {"bridge": "none", "iptables": false, "ip6tables": false} to /etc/docker/daemon.json '
            "(.ci/docker-engine merges it) and restart dockerd")


def network_rule_violation(c: Any | None = None) -> str | None:
    """Why this engine breaks the network rule (127.0.0.1 only, no bridge), or None.

    Containers run on the host network and bind loopback, but an engine with a `bridge` network
    (docker0 with a subnet, iptables NAT) puts addresses outside loopback on this machine, and an
    engine behind a remote DOCKER_HOST runs the cluster on another machine whose loopback is not
    ours: the run would not be what it says, so it is refused."""
    host = os.environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return (f"DOCKER_HOST={host} is not a local unix socket: the cluster must run on this machine's "
                "loopback; unset DOCKER_HOST (or point it at unix:///var/run/docker.sock)")
    if c is None:
        return None
    for n in c.networks.list(names=["bridge"]):
        if n.name != "bridge":          # the filter matches substrings
            continue
        subnets = [x.get("Subnet") for x in (n.attrs.get("IPAM") or {}).get("Config") or [] if x.get("Subnet")]
        if subnets:
            return (f"the docker engine has a 'bridge' network ({', '.join(subnets)}): the network rule allows "
                    f"127.0.0.1 only, no bridge; {RULE_FIX}")
    return None


def server_version() -> tuple[str | None, str | None]:
    """(the engine's version from its API, None) or (None, why not and the fix). An engine that
    answers the ping but fails the version call is reported, not raised (doctor must finish)."""
    try:
        c = client(timeout=5)
    except MissingDependency as e:
        return None, str(e)
    try:
        v = c.version()
        return f"{v.get('Version')} (API {v.get('ApiVersion')})", None
    except Exception as e:  # noqa: BLE001 - any engine failure is a row in the report, with the fix
        return None, f"the docker engine answered a ping but not its version ({e.__class__.__name__}: {e}); {FIX}"
    finally:
        c.close()


def network_status() -> str | None:
    """Why the engine breaks the network rule, or None (also None without an engine: nothing runs)."""
    why = network_rule_violation()
    if why:
        return why
    try:
        c = client(timeout=5)
    except MissingDependency:
        return None
    try:
        return network_rule_violation(c)
    except Exception as e:  # noqa: BLE001 - unknown is not fine: say so
        return f"could not list the engine's networks ({e.__class__.__name__}: {e})"
    finally:
        c.close()


def available() -> str | None:
    """None when an engine answers; otherwise why not (for skips and refusals)."""
    return server_version()[1]
