"""Which image a docker run's containers start from, and how a command runs in it.

- the default: the self-contained image built here (harness/backends/docker/build.py): psnodes
  installed from this pschaos's wheel, etcd and Toxiproxy in it; only the run folder is mounted.
- `host`: the bind-mounted skeleton (harness/backends/docker/image.py): the host's /usr, Python,
  venv and checkout at the same paths, read-only. Nothing is built, so it is the fast option
  while developing pschaos itself; it tests this machine in a cgroup, not a shippable artifact.
- any other name: the user's own image (built from docker/Dockerfile or their own recipe), with
  `python3` (pschaos installed), `etcd` and `toxiproxy-server` on its PATH.

The scenario's `cluster.image` chooses; `PSCHAOS_DOCKER_IMAGE` does for every run that does not
name one (`PSCHAOS_DOCKER_IMAGE=host make test-docker`).
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.docker import image as skeleton
from pschaos.harness.machinery import tools

HOST = "host"
# the host's programs a run starts, by what the image calls them (found on the image's PATH)
TOOLS = ("etcd", "toxiproxy-server")


@dataclass(frozen=True)
class ImagePlan:
    tag: str
    bind_host: bool            # True: the skeleton with the host's paths bind-mounted

    def mounts(self, run_dir: Path) -> dict[str, dict[str, str]]:
        if self.bind_host:
            return skeleton.mounts(run_dir)
        return {str(run_dir): {"bind": str(run_dir), "mode": "rw"}}

    def environment(self) -> dict[str, str]:
        """The image's own PATH stays (its venv first); the rest as every backend's children."""
        if self.bind_host:
            return skeleton.environment()
        return {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "HOME": "/tmp"}

    def command(self, argv: list[str]) -> list[str]:
        """`argv` as it runs in the image: the host's Python is the image's `python3`, the host's
        etcd and Toxiproxy (wherever PSCHAOS_ETCD or tools/bin put them) the image's, which the
        self-contained image copied from those very binaries (harness/backends/docker/build.py)."""
        if self.bind_host or not argv:
            return list(argv)
        exe, name = argv[0], Path(argv[0]).name
        if exe == sys.executable or re.fullmatch(r"python(3(\.\d+)?)?", name):
            return ["python3", *argv[1:]]
        for tool in TOOLS:
            if exe == tools.find(tool) or name == tool or name.startswith(tool + "-"):   # etcd-3.5, not etcdctl
                return [tool, *argv[1:]]
        if Path(exe).is_absolute():
            raise HarnessError(f"{exe}: a program of this machine, which the image {self.tag} does not have; "
                               "the docker backend runs python3, etcd and toxiproxy-server from the image")
        return list(argv)


def chosen(name: str | None) -> str | None:
    """The image asked for: the scenario's, else PSCHAOS_DOCKER_IMAGE, else None (the default)."""
    return name or os.environ.get("PSCHAOS_DOCKER_IMAGE") or None


def plan(client: Any, name: str | None) -> ImagePlan:
    """The plan for `name` (cluster.image), building or importing what the engine lacks."""
    name = chosen(name)
    if name == HOST:
        return ImagePlan(skeleton.ensure_image(client), True)
    if name is None:
        from pschaos.harness.backends.docker.build import ensure_self_contained

        return ImagePlan(ensure_self_contained(client), False)
    docker = sys.modules["docker"]
    try:
        image = client.images.get(name)
    except docker.errors.ImageNotFound:
        try:
            image = client.images.pull(name)
        except docker.errors.APIError as e:
            raise HarnessError(f"cluster.image {name!r}: the engine has no such image and could not pull it "
                               f"({e.explanation or e}); build it with docker/Dockerfile (docs/docker.md), or leave "
                               "cluster.image out for the image pschaos builds itself") from None
    return ImagePlan(image.id, False)      # by id: a tag moved during the run changes none of its containers


__all__ = ["HOST", "ImagePlan", "chosen", "plan"]
