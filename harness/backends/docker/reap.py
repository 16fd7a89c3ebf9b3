"""What `pschaos clean` removes from the engine: every container, volume and run image whose run
has no live owner (their labels name the run and its owner by pid and start time, as a process's
environment does), or of every run with `--all`. Without an engine there is nothing to remove,
and clean says so."""
from __future__ import annotations

from typing import Any

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.procs import owner_alive
from pschaos.harness.backends.docker.containers import LABEL_OWNER, LABEL_OWNER_START, remove_run, run_containers, run_images, run_volumes
from pschaos.harness.backends.docker.engine import LABEL_RUN


def _dead(labels: dict[str, str]) -> bool:
    """Whether the run that made a thing is gone. A thing with no owner label is not ours to
    judge (made by hand or by another tool with our run label): foreign, kept unless `--all`."""
    if LABEL_OWNER not in labels:
        return False
    try:
        owner = int(labels[LABEL_OWNER])
        started = float(labels[LABEL_OWNER_START]) if labels.get(LABEL_OWNER_START) not in (None, "None") else None
    except ValueError:
        return True
    return not owner_alive(owner, started)


def reap_engine(all_runs: bool = False) -> tuple[list[str], list[str], str | None]:
    """Remove what dead runs left on the engine. Returns (a line per thing removed, a line per
    problem, why the engine was not checked at all): a run whose removal failed is reported and
    the others are still reaped; no SDK or no engine answering is said, not read as "0 removed"."""
    try:
        import docker
    except ImportError:
        return [], [], "the Docker SDK is not installed: no containers or volumes checked"
    try:
        client: Any = docker.from_env(timeout=30)
        client.ping()
    except docker.errors.DockerException as e:
        return [], [], (f"no Docker engine answers ({e.__class__.__name__}): containers and volumes not checked; "
                        "if a docker run left some, start the engine (.ci/docker-engine) and run pschaos clean again")
    problems: list[str] = []
    try:
        owners: dict[str, dict[str, str]] = {}
        for thing in [*run_containers(client), *run_volumes(client), *run_images(client)]:
            labels = (thing.attrs.get("Labels") if hasattr(thing, "attrs") and "Labels" in thing.attrs
                      else thing.labels) or {}
            owners.setdefault(labels[LABEL_RUN], labels)
        gone: list[str] = []
        for run_id, labels in sorted(owners.items()):
            if all_runs or _dead(labels):
                try:
                    gone += remove_run(client, run_id)
                except HarnessError as e:       # one stuck run must not keep the others
                    problems.append(str(e))
        return gone, problems, None
    finally:
        client.close()


def engine_runs() -> set[str] | None:
    """The run ids that containers on the engine carry (running or not): a detached docker
    cluster's processes live in them, untagged in the host's /proc. An empty set when there is no
    SDK or no engine configured here (so no container can exist); None when an engine is configured
    but does not answer (nothing can be said: the caller keeps what it cannot judge)."""
    import os

    try:
        import docker
    except ImportError:
        return set()
    try:
        client: Any = docker.from_env(timeout=30)
        client.ping()
    except Exception:  # noqa: BLE001 - the SDK raises requests' errors too (a timeout)
        configured = os.environ.get("DOCKER_HOST") or os.path.exists("/var/run/docker.sock")
        return None if configured else set()
    try:
        return {(c.labels or {}).get(LABEL_RUN) for c in run_containers(client)} - {None}
    except Exception:  # noqa: BLE001 - an engine that fails the listing tells nothing
        return None
    finally:
        client.close()
