"""The self-contained image the docker backend runs by default: psnodes installed from a wheel,
with etcd and Toxiproxy, and nothing of this machine bind-mounted but the run folder.

Three images, each built only when the engine lacks its tag (a hash of everything that went in):
- the base (harness/backends/docker/debian.py): Debian bookworm made here with debootstrap, or
  a python:3.11 base where the engine can pull one;
- `pschaos-deps:<hash>`: a venv at /opt/pschaos with pschaos's requirements, each pinned to the
  version installed here, from the package index the host's pip uses (its index URLs, trusted
  hosts, proxies and CA bundle passed on). PyTorch makes this minutes, once per set of versions;
- `pschaos:<hash>`: the deps image with this pschaos's wheel (`--no-deps`) and the host's own
  etcd and Toxiproxy binaries (static Go programs: the etcd the host would run, 3.5 when
  PSCHAOS_ETCD names it, is the one the containers run). A changed source is a new tag, seconds.
The recipe is docker/Dockerfile (this package's Dockerfile); docs/docker.md tells how to build it
by hand.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.docker.debian import base_image, have
from pschaos.harness.backends.docker.engine import LABEL_KIND
from pschaos.harness.backends.docker.wheel import pinned_requirements, pschaos_wheel, source_digest, staged_sources
from pschaos.harness.machinery import tools

RECIPE = "pschaos-image/2"          # bump when the meaning of a step below changes
DEPS_REPO, APP_REPO = "pschaos-deps", "pschaos"
DOCKERFILE = Path(__file__).with_name("Dockerfile")     # docker/Dockerfile links to it
KEEP = {APP_REPO: 4, DEPS_REPO: 2}  # newest images kept of each (deps: PyTorch, GB each)
PRUNE_AFTER_S = 24 * 3600           # and none younger than this (another run may be about to use it)
AUTO_TAG = re.compile(r"^[0-9a-f]{16}$")   # only the tags made here are pruned, never a user's pschaos:local
PASSED_ON = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_DEFAULT_TIMEOUT",
             "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
Say = Callable[[str], None]


def _tag(repo: str, *parts: str | bytes) -> str:
    h = hashlib.sha256(RECIPE.encode() + DOCKERFILE.read_bytes())
    for p in parts:
        h.update(p if isinstance(p, bytes) else p.encode())
        h.update(b"\0")
    return f"{repo}:{h.hexdigest()[:16]}"


def _pip_settings(build: Path) -> dict[str, str]:
    """Build args from the machine's pip and proxy settings, and the CA bundle pip is told to
    trust (copied into the context's build/). Credentials in an index URL would be visible in
    the image's history: docs/docker.md says to use a netrc-free index or a pip.conf instead."""
    args = {k: v for k in PASSED_ON if (v := os.environ.get(k))}
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
    if not have(client, tag):
        raise HarnessError(f"building {tag} ended without the image; the build's last lines:\n" + "\n".join(tail[-12:]))


def deps_image(client: Any, base: str, say: Say) -> str:
    """pschaos's requirements in a venv on `base` (keyed by the base's content, not its name)."""
    reqs = pinned_requirements()
    tag = _tag(DEPS_REPO, client.images.get(base).id, *reqs)
    if have(client, tag):
        return tag
    say(f"building {tag}: pschaos's {len(reqs)} requirements, pinned, on {base} (PyTorch makes it minutes)")
    with tempfile.TemporaryDirectory(prefix="pschaos-deps-") as tmp:
        build = Path(tmp) / "build"
        build.mkdir()
        (build / "requirements.txt").write_text("\n".join(reqs) + "\n")
        _build(client, Path(tmp), tag, {"FROM": base, **_pip_settings(build)}, say)
    return tag


def app_image(client: Any, deps: str, say: Say) -> str:
    """The deps image with this pschaos's wheel and the host's etcd and Toxiproxy (seconds).
    The sources are staged once: the tag's digest and the wheel come from the same copy, so an
    edit while this runs cannot put other code under the tag."""
    toxi, etcd = Path(tools.need("toxiproxy-server")), Path(tools.need("etcd"))
    with tempfile.TemporaryDirectory(prefix="pschaos-app-") as tmp:
        src = staged_sources(Path(tmp) / "src")
        tag = _tag(APP_REPO, deps, source_digest(src), toxi.read_bytes(), etcd.read_bytes())
        if have(client, tag):
            return tag
        build = Path(tmp) / "ctx" / "build"
        build.mkdir(parents=True)
        wheel = pschaos_wheel(build, src)
        say(f"building {tag}: {wheel.name}, etcd and Toxiproxy on {deps}")
        shutil.copyfile(toxi, build / "toxiproxy-server")
        shutil.copyfile(etcd, build / "etcd")
        _build(client, build.parent, tag, {"FROM": deps, "WHEEL_DEPS": "0"}, say)
    return tag


def prune(client: Any, keep: set[str]) -> list[str]:
    """Remove the older images made here: beyond the newest KEEP of each repository, none younger
    than PRUNE_AFTER_S, only tags of the form made here, never one in `keep`. Best effort: an image
    a container uses is refused by the engine and stays, and no error fails the run."""
    gone = []
    try:
        for repo, n in KEEP.items():
            ims = [im for im in client.images.list(name=repo, filters={"label": f"{LABEL_KIND}=image"})
                   if im.tags and all(t.split(":", 1)[0] == repo and AUTO_TAG.match(t.split(":", 1)[1]) for t in im.tags)
                   and not keep & set(im.tags)]
            ims.sort(key=lambda im: im.attrs.get("Created", ""), reverse=True)
            for im in ims[max(0, n - 1):]:
                if time.time() - _created(im) < PRUNE_AFTER_S:
                    continue
                try:
                    client.images.remove(im.id)
                    gone.append(im.tags[0])
                except Exception:  # noqa: BLE001 - in use, or the engine slow: it stays
                    pass
    except Exception:  # noqa: BLE001 - pruning never fails a run
        pass
    return gone


def _created(im: Any) -> float:
    from datetime import datetime

    raw = str(im.attrs.get("Created", ""))
    try:
        return datetime.fromisoformat(raw[:26].rstrip("Z") + "+00:00").timestamp()
    except ValueError:
        return time.time()


def ensure_self_contained(client: Any, base: str | None = None, say: Say | None = None) -> str:
    """The app image's tag, building what the engine lacks (one build at a time on this
    machine: a file lock, as two pytest workers may start docker runs at once)."""
    say = say or (lambda line: print(f"[pschaos] {line}", file=sys.stderr, flush=True))
    lock = Path(tempfile.gettempdir()) / "pschaos-image-build.lock"
    with open(lock, "a") as fd:
        fcntl.flock(fd, fcntl.LOCK_EX)
        before = {t for im in client.images.list(name=APP_REPO) for t in im.tags}
        deps = deps_image(client, base or base_image(client, say), say)
        app = app_image(client, deps, say)
        if app not in before:
            settle(client, app, say)
        prune(client, {app, deps})
        return app


def settle(client: Any, tag: str, say: Say) -> None:
    """After a build: wait for the kernel to write the new layers out (gigabytes after the deps
    step; until then every fsync on this disk, etcd's WAL first, waits behind them: the first
    docker run after a fresh image once found no primary within 30 s), then start the image once
    (the imports a node and a worker make, with their versions) so that a broken image fails here,
    naming itself, and the first run finds its files in the page cache."""
    t = time.monotonic()
    os.sync()
    probe = ("import pschaos, pschaos.psnodes.serve, pschaos.psnodes.worker, torch, grpc; "
             "from importlib.metadata import version; print(version('pschaos'), torch.__version__)")
    docker = sys.modules["docker"]
    try:
        out = client.containers.run(tag, ["python3", "-c", probe], network_mode="host", remove=True,
                                    labels={LABEL_KIND: "image-check"})
    except docker.errors.ContainerError as e:
        raise HarnessError(f"the image {tag} was built but does not start pschaos: "
                           f"{(e.stderr or b'').decode(errors='replace')[-600:]}") from None
    say(f"{tag} checked (pschaos and torch {out.decode().strip()}) in {time.monotonic() - t:.0f} s")


__all__ = ["app_image", "deps_image", "ensure_self_contained", "prune"]
