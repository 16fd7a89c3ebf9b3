"""docker/compose.yaml and docker/Dockerfile, the files users with Compose or a registry run."""
from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from pschaos.harness.machinery.tools import REPO

COMPOSE = REPO / "docker" / "compose.yaml"


def compose_command() -> list[str] | None:
    """`docker compose` (the plugin) or `docker-compose` (the standalone program), whichever answers."""
    for cmd in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(cmd[0]) is None:
            continue
        if subprocess.run([*cmd, "version"], capture_output=True, timeout=30).returncode == 0:
            return cmd
    return None


def test_compose_file_is_valid_for_compose():
    cmd = compose_command()
    if cmd is None:
        pytest.skip("Docker Compose is not installed (neither `docker compose` nor `docker-compose` answers)")
    p = subprocess.run([*cmd, "-f", str(COMPOSE), "config", "--quiet"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def test_compose_services_use_the_host_network_and_loopback_only():
    doc = yaml.safe_load(COMPOSE.read_text())
    assert "networks" not in doc                       # no bridge network is ever created
    for name, svc in doc["services"].items():
        assert svc.get("network_mode") == "host" or svc.get("<<") is not None, name
    text = COMPOSE.read_text()
    assert "0.0.0.0" not in text and "ports:" not in text


def test_dockerfile_installs_the_wheel_in_a_venv_with_etcd_and_toxiproxy():
    """The recipe the docker backend builds its image with (harness/backends/docker/build.py) and users by hand."""
    text = (REPO / "docker" / "Dockerfile").read_text()
    assert "FROM ${FROM}" in text and "python3 -m venv /opt/pschaos" in text and "pip install" in text
    assert "etcd-server" in text and "/usr/local/bin/toxiproxy-server" in text
