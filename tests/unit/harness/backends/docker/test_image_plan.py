"""The docker backend's image choice: the self-contained image by default (only the run folder
mounted, the host's programs called by their names in the image), the bind-mounted skeleton for
`host`, a user's image by name; the wheel it installs and the requirements it pins."""
from __future__ import annotations

import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.backends.docker import plan as plans
from pschaos.harness.backends.docker.plan import ImagePlan
from pschaos.harness.backends.docker.wheel import pinned_requirements, repack, source_digest
from pschaos.harness.machinery import tools


def test_the_self_contained_plan_mounts_only_the_run_folder(tmp_path):
    p = ImagePlan("pschaos:abc", bind_host=False)
    assert p.mounts(tmp_path) == {str(tmp_path): {"bind": str(tmp_path), "mode": "rw"}}
    assert "PATH" not in p.environment()           # the image's own PATH (its venv first) stays


def test_host_programs_become_the_images_own(tmp_path, monkeypatch):
    monkeypatch.setenv("PSCHAOS_ETCD", str(tmp_path / "etcd-3.5"))
    (tmp_path / "etcd-3.5").write_text("")
    p = ImagePlan("pschaos:abc", bind_host=False)
    assert p.command([sys.executable, "-m", "pschaos.psnodes.serve", "--config", "c.json"]) == \
        ["python3", "-m", "pschaos.psnodes.serve", "--config", "c.json"]
    assert p.command([str(tmp_path / "etcd-3.5"), "--name", "etcd"]) == ["etcd", "--name", "etcd"]
    assert p.command(["/opt/x/tools/bin/toxiproxy-server", "-port", "1"]) == ["toxiproxy-server", "-port", "1"]
    assert p.command(["sh", "-c", "true"]) == ["sh", "-c", "true"]
    with pytest.raises(Exception, match="/usr/bin/etcdctl: a program of this machine"):
        p.command(["/usr/bin/etcdctl", "get", "x"])


def test_the_host_plan_keeps_the_host_paths(tmp_path):
    p = ImagePlan("pschaos-base:1", bind_host=True)
    argv = [sys.executable, "-m", "x"]
    assert p.command(argv) == argv
    assert str(tmp_path) in p.mounts(tmp_path) and "/usr" in p.mounts(tmp_path)


def test_the_scenario_chooses_else_the_environment(monkeypatch):
    monkeypatch.delenv("PSCHAOS_DOCKER_IMAGE", raising=False)
    assert plans.chosen(None) is None and plans.chosen("mine:1") == "mine:1"
    monkeypatch.setenv("PSCHAOS_DOCKER_IMAGE", "host")
    assert plans.chosen(None) == "host" and plans.chosen("mine:1") == "mine:1"


def test_a_missing_user_image_names_the_fix():
    import docker

    class Images:
        def get(self, name):
            raise docker.errors.ImageNotFound("no")

        def pull(self, name):
            raise docker.errors.APIError("pull access denied")
    with pytest.raises(Exception, match="cluster.image 'mine:1'.*docker/Dockerfile"):
        plans.plan(SimpleNamespace(images=Images()), "mine:1")


def test_cluster_image_is_checked_when_the_scenario_loads():
    assert ClusterSpec(image="registry.example/team/ps:1.2").image == "registry.example/team/ps:1.2"
    with pytest.raises(ValueError, match="image"):
        ClusterSpec(image="two words")


def test_requirements_are_pinned_to_what_is_installed_here():
    reqs = pinned_requirements()
    from importlib import metadata
    assert f"torch=={metadata.version('torch')}" in reqs and f"grpcio=={metadata.version('grpcio')}" in reqs
    assert all("==" in r for r in reqs) and not any(r.startswith(("pytest", "selenium")) for r in reqs)  # no extras


def test_a_repacked_installed_distribution_is_a_wheel_with_its_record(tmp_path):
    """Outside a checkout the wheel is packed from the installed files (here: simpy's)."""
    w = repack(tmp_path, "simpy")
    with zipfile.ZipFile(w) as z:
        names = z.namelist()
        record = z.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
    assert any(n.endswith(".dist-info/METADATA") for n in names) and "simpy/__init__.py" in names
    assert not any("__pycache__" in n for n in names)
    assert "simpy/__init__.py,sha256=" in record
    assert source_digest(None, "simpy") == source_digest(None, "simpy")


def test_the_recipe_ships_with_the_package():
    from pschaos.harness.backends.docker.build import DOCKERFILE
    assert DOCKERFILE.is_file() and "FROM ${FROM}" in DOCKERFILE.read_text()
    if tools.CHECKOUT:
        assert (tools.REPO / "docker" / "Dockerfile").resolve() == DOCKERFILE.resolve()


def test_a_pause_the_freezer_gave_up_on_is_tried_again_and_other_errors_are_not(tmp_path):
    import docker

    from pschaos.harness.backends.docker.containers import PAUSE_TRIES, ContainerHandle

    refusals = []

    def pause():
        if refusals:
            raise docker.errors.APIError(refusals.pop(0))
    c = SimpleNamespace(attrs={"State": {"Pid": 0, "Running": False}}, reload=lambda: None, pause=pause)
    h = ContainerHandle("shard-0/0", c, tmp_path / "log")
    refusals[:] = ["OCI runtime pause failed: unable to freeze: unknown"] * (PAUSE_TRIES - 1)
    h._pause()
    assert refusals == []
    refusals[:] = ["OCI runtime pause failed: unable to freeze: unknown"] * PAUSE_TRIES
    with pytest.raises(docker.errors.APIError, match="unable to freeze"):
        h._pause()
    refusals[:] = ["Internal Server Error: something else"]
    with pytest.raises(docker.errors.APIError, match="something else"):
        h._pause()


def test_the_app_tag_follows_the_staged_sources_byte_for_byte(tmp_path):
    from pschaos.harness.backends.docker.wheel import staged_sources
    if not tools.CHECKOUT:
        pytest.skip("needs a checkout of pschaos (an installed one digests its RECORD)")
    src = staged_sources(tmp_path / "src")
    first = source_digest(src)
    assert source_digest(src) == first
    (src / "harness" / "new_file.py").write_text("x = 1\n")
    assert source_digest(src) != first


def test_prune_spares_a_users_tag_and_young_images(monkeypatch):
    from pschaos.harness.backends.docker import build

    removed = []
    old = "2000-01-01T00:00:00.000000000Z"
    ims = [SimpleNamespace(id=f"id{i}", tags=[t], attrs={"Created": old}) for i, t in enumerate(
        ["pschaos:0123456789abcdef", "pschaos:1123456789abcdef", "pschaos:2123456789abcdef",
         "pschaos:3123456789abcdef", "pschaos:4123456789abcdef", "pschaos:local"])]
    young = SimpleNamespace(id="young", tags=["pschaos:5123456789abcdef"], attrs={"Created": "2999-01-01T00:00:00Z"})
    client = SimpleNamespace(images=SimpleNamespace(
        list=lambda name, filters: [young, *ims] if name == "pschaos" else [],
        remove=lambda i: removed.append(i)))
    build.prune(client, keep={"pschaos:0123456789abcdef"})
    assert "young" not in removed and "id5" not in removed and "id0" not in removed
    assert removed and all(r in {"id1", "id2", "id3", "id4"} for r in removed)


def test_a_killed_builds_rootfs_is_unmounted_before_it_is_removed(tmp_path):
    """A debootstrap killed mid-way leaves its /proc mounted in the rootfs: the remove unmounts it
    first, never reaching through a mount."""
    import os
    import subprocess

    from pschaos.harness.backends.docker.debian import remove_rootfs
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    proc = tmp_path / "root" / "proc"
    proc.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "none", str(proc)], check=True)
    (proc / "inside").write_text("x")
    remove_rootfs(tmp_path)
    assert not tmp_path.exists()
    assert str(proc) not in Path("/proc/mounts").read_text()
