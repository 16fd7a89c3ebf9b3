"""The self-contained image the docker backend runs by default: psnodes installed from a wheel,
with etcd and Toxiproxy, and nothing of this machine bind-mounted but the run folder.

Three images, each built only when the engine lacks its tag (a hash of everything that went in):
- `pschaos-debian:<hash>`: Debian bookworm made here with Debian's `debootstrap` (minbase, with
  python3, python3-venv, etcd-server and ca-certificates) and `docker import`: no registry is
  reachable where pschaos runs its tests. `PSCHAOS_DOCKER_BASE` names another base instead, e.g. `python:3.11-slim-bookworm` on a machine that can pull: one
  with `python3 -m venv`; etcd comes from its apt when it has none.
- `pschaos-deps:<hash>`: a venv at /opt/pschaos with pschaos's requirements, each pinned to the
  version installed here, from the package index (the machine's pip settings passed on).
- `pschaos:<hash>`: the deps image, the pschaos wheel (`--no-deps`) and the Toxiproxy server.
  A changed wheel is a new tag, a few seconds to build; unchanged, nothing is built.
The recipe is docker/Dockerfile; docs/docker.md tells how to build it by hand.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from pschaos.harness.errors import HarnessError, MissingDependency
from pschaos.harness.backends.docker.engine import LABEL_KIND
from pschaos.harness.backends.docker.wheel import pinned_requirements, pschaos_wheel, source_digest
from pschaos.harness.machinery import tools

RECIPE = "pschaos-image/1"          # bump when a recipe below changes meaning
BASE_REPO, DEPS_REPO, APP_REPO = "pschaos-debian", "pschaos-deps", "pschaos"
SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
PACKAGES = ("python3", "python3-venv", "etcd-server", "ca-certificates")
DOCKERFILE = Path(__file__).with_name("Dockerfile")     # docker/Dockerfile links to it
KEEP_APP_IMAGES = 4                 # older app images are removed (unused ones)
KEEP_DEPS_IMAGES = 2                # and older deps images (PyTorch: several GB each)
Say = Callable[[str], None]


def _tag(repo: str, *parts: str | bytes) -> str:
    h = hashlib.sha256(RECIPE.encode())
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return f"{repo}:{h.hexdigest()[:16]}"


def _have(client: Any, tag: str) -> bool:
    docker = sys.modules["docker"]
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def debian_base(client: Any, say: Say) -> str:
    """The debootstrap base's tag, made and imported when the engine lacks it (about 70 s)."""
    tag = _tag(BASE_REPO, SUITE, MIRROR, *PACKAGES)
    if _have(client, tag):
        return tag
    exe = shutil.which("debootstrap")
    if exe is None:
        raise MissingDependency("debootstrap is not installed (it makes the docker backend's Debian base); "
                                "install it with: apt-get install -y debootstrap   (or name a base you can pull: "
                                "PSCHAOS_DOCKER_BASE=python:3.11-slim-bookworm)")
    say(f"making the Debian base {tag} with debootstrap ({SUITE}, minbase; about a minute)")
    with tempfile.TemporaryDirectory(prefix="pschaos-rootfs-", dir="/var/tmp") as tmp:
        root = Path(tmp) / "root"
        out = subprocess.run([exe, "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(root), MIRROR],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise HarnessError(f"debootstrap {SUITE} failed (exit {out.returncode}): "
                               f"{(out.stderr or out.stdout).strip()[-400:]}; is {MIRROR} reachable?")
        shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
        tar = Path(tmp) / "root.tar"
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(tar), "."], check=True)
        repo, version = tag.split(":")
        client.api.import_image_from_file(str(tar), repository=repo, tag=version,
                                          changes=[f"LABEL {LABEL_KIND}=base-image", "CMD [\"/bin/sh\"]"])
    return tag


def _pip_settings(build: Path) -> dict[str, str]:
    """The machine's pip settings a build needs to reach the same index: index URLs, trusted
    hosts, timeout, and the CA bundle pip is told to trust (copied into the context's build/)."""
    args = {k: v for k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT")
            if (v := os.environ.get(k))}
    cert = os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE")
    if cert and Path(cert).is_file():
        shutil.copyfile(cert, build / "pip-cert.pem")
    return args


def _build(client: Any, ctx: Path, tag: str, args: dict[str, str], say: Say) -> None:
    """docker/Dockerfile over `ctx` (whose build/ holds what goes in), on the host network. Each
    step is shown as it starts (the deps step runs for minutes); a failed step is a HarnessError
    with the end of its output."""
    shutil.copyfile(DOCKERFILE, ctx / "Dockerfile")
    tail: list[str] = []
    for chunk in client.api.build(path=str(ctx), tag=tag, buildargs=args, network_mode="host", rm=True,
                                  forcerm=True, labels={LABEL_KIND: "image"}, decode=True):
        line = str(chunk.get("stream", "")).rstrip()
        if line:
            tail = (tail + [line])[-20:]
            if line.startswith("Step "):
                say(f"  {line[:120]}")
        if "error" in chunk:
            raise HarnessError(f"building {tag} failed: {chunk['error'].strip()}\n" + "\n".join(tail[-12:]))
    if not _have(client, tag):
        raise HarnessError(f"building {tag} ended without the image; the build's last lines:\n" + "\n".join(tail[-12:]))


def deps_image(client: Any, base: str, say: Say) -> str:
    """pschaos's requirements in a venv on `base` (minutes the first time: PyTorch)."""
    reqs = pinned_requirements()
    tag = _tag(DEPS_REPO, base, *reqs)
    if _have(client, tag):
        return tag
    say(f"building {tag}: pschaos's {len(reqs)} requirements, pinned, on {base} (PyTorch makes it minutes)")
    with tempfile.TemporaryDirectory(prefix="pschaos-deps-") as tmp:
        build = Path(tmp) / "build"
        build.mkdir()
        (build / "requirements.txt").write_text("\n".join(reqs) + "\n")
        _build(client, Path(tmp), tag, {"FROM": base, **_pip_settings(build)}, say)
    _prune(client, DEPS_REPO, tag, KEEP_DEPS_IMAGES)     # several GB each
    return tag


def app_image(client: Any, deps: str, say: Say) -> str:
    """The deps image with this pschaos's wheel and the Toxiproxy server (seconds)."""
    toxi = Path(tools.need("toxiproxy-server"))
    tag = _tag(APP_REPO, deps, source_digest(), toxi.read_bytes())
    if _have(client, tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="pschaos-app-") as tmp:
        build = Path(tmp) / "build"
        build.mkdir()
        wheel = pschaos_wheel(build)
        say(f"building {tag}: {wheel.name} on {deps}")
        shutil.copyfile(toxi, build / "toxiproxy-server")
        _build(client, Path(tmp), tag, {"FROM": deps, "WHEEL_DEPS": "0"}, say)
    _prune(client, APP_REPO, tag, KEEP_APP_IMAGES)
    return tag


def _prune(client: Any, repo: str, keep: str, newest: int) -> None:
    """Remove all but the `newest` images of `repo` (`keep` among them); one a container or a
    newer image still uses is refused by the engine and stays."""
    docker = sys.modules["docker"]
    images = [im for im in client.images.list(name=repo) if keep not in im.tags]
    images.sort(key=lambda im: im.attrs.get("Created", ""), reverse=True)
    for im in images[newest - 1:]:
        try:
            client.images.remove(im.id)
        except docker.errors.APIError:
            pass


def ensure_self_contained(client: Any, base: str | None = None, say: Say | None = None) -> str:
    """The app image's tag, building what the engine lacks (one build at a time on this
    machine: a file lock, as two pytest workers may start docker runs at once)."""
    say = say or (lambda line: print(f"[pschaos] {line}", file=sys.stderr, flush=True))
    lock = Path(tempfile.gettempdir()) / "pschaos-image-build.lock"
    with open(lock, "a") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        base = base or os.environ.get("PSCHAOS_DOCKER_BASE") or debian_base(client, say)
        return app_image(client, deps_image(client, base, say), say)


__all__ = ["ensure_self_contained", "debian_base", "deps_image", "app_image"]
