"""The Docker backend's pure parts, without an engine: the image's content and tag, the mounts a
container gets, container names, and the GPU device requests built from `device`/`gpus`."""
from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

import pytest

from pschaos.harness.backends.docker.containers import container_name
from pschaos.harness.backends.docker.gpu import device_requests, worker_requests
from pschaos.harness.backends.docker.image import image_tag, mounts, skeleton_tar
from pschaos.harness.errors import MissingDependency
from pschaos.harness.machinery.tools import REPO

NVIDIA = {"Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}}
PLAIN = {"Runtimes": {"runc": {}}}


def test_skeleton_is_the_same_bytes_every_time_and_only_a_skeleton():
    a, b = skeleton_tar(), skeleton_tar()
    assert a == b and image_tag(a) == image_tag(b)
    with tarfile.open(fileobj=io.BytesIO(a)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["lib"].issym() and members["lib"].linkname == "usr/lib"
    assert all(m.mtime == 0 and m.uid == 0 for m in members.values())
    assert sum(m.size for m in members.values()) < 100          # a passwd line, no programs


def test_tag_carries_a_content_hash():
    repo, digest = image_tag().split(":")
    assert repo == "pschaos-base" and len(digest) == 16 and int(digest, 16) >= 0
    assert image_tag(skeleton_tar() + b"x") != image_tag()


def test_mounts_are_read_only_but_the_run_folder(tmp_path):
    binds = mounts(tmp_path)
    assert binds[str(tmp_path)] == {"bind": str(tmp_path), "mode": "rw"}
    assert binds[str(REPO)]["mode"] == "ro" and binds["/usr"]["mode"] == "ro"
    assert [k for k, v in binds.items() if v["mode"] == "rw"] == [str(tmp_path)]
    base = Path(sys.base_prefix).resolve()
    assert any(base == Path(k) or Path(k) in base.parents for k in binds)      # the Python the venv runs on


def test_container_names_are_engine_safe():
    assert container_name("kill-primary-1-ab12", "shard-0/1") == "pschaos-kill-primary-1-ab12-shard-0-1"


@pytest.mark.parametrize("device,gpus,want", [
    ("cpu", None, []),
    ("auto", None, []),
    ("cuda", None, [{"Driver": "nvidia", "Capabilities": [["gpu"]], "Count": -1}]),
    ("cuda", 2, [{"Driver": "nvidia", "Capabilities": [["gpu"]], "Count": 2}]),
    ("cuda", ["0", "3"], [{"Driver": "nvidia", "Capabilities": [["gpu"]], "DeviceIDs": ["0", "3"]}]),
    ("cuda:1", None, [{"Driver": "nvidia", "Capabilities": [["gpu"]], "DeviceIDs": ["1"]}]),
])
def test_device_requests(device, gpus, want):
    assert device_requests(device, gpus) == want


def test_cuda_without_a_gpu_runtime_fails_naming_the_fix(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(MissingDependency, match="cluster.device: cuda.*no GPU runtime.*nvidia-container-toolkit"):
        worker_requests("cuda", None, PLAIN)


def test_auto_falls_back_to_the_cpu_and_uses_a_runtime_when_there_is_one(monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert worker_requests("auto", None, PLAIN) == ("auto", [])
    dev, reqs = worker_requests("auto", 1, NVIDIA)
    assert dev == "auto" and reqs[0]["Count"] == 1
    assert worker_requests("cuda:2", None, NVIDIA) == ("cuda", [{"Driver": "nvidia", "Capabilities": [["gpu"]],
                                                                 "DeviceIDs": ["2"]}])


def test_the_sdk_request_carries_what_was_built():
    pytest.importorskip("docker", reason="the docker SDK is not installed (pip install docker)")
    from pschaos.harness.backends.docker.backend import _request

    r = _request(device_requests("cuda", ["0", "3"])[0])
    assert (r["Driver"], r["DeviceIDs"], r["Capabilities"]) == ("nvidia", ["0", "3"], [["gpu"]])
    assert _request(device_requests("cuda", None)[0])["Count"] == -1


def test_a_container_removed_between_the_listing_and_its_inspect_is_listed_again():
    """CI's test_docker_clean: `pschaos clean` crashed with NotFound when a parallel test's teardown
    removed a container between the SDK's list and its inspect (seen on the old code there)."""
    import docker

    from pschaos.harness.backends.docker.containers import run_containers

    class Containers:
        calls = 0

        def list(self, **kw):
            Containers.calls += 1
            if Containers.calls == 1:
                raise docker.errors.NotFound("No such container: 6891")
            return ["c1"]

    class Client:
        containers = Containers()

    assert run_containers(Client()) == ["c1"] and Containers.calls == 2
