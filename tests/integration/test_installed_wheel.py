"""pschaos as a user gets it: the wheel built from this checkout, installed into a fresh virtual
environment in a folder outside the checkout, run beside a user's own `harness` and `reports`
packages (which raise if anything imports them).

The environment is fresh for pschaos itself (its wheel, its console script, its package data);
its dependencies (PyTorch, gRPC, pytest, ...) are lent by this checkout's environment through a
.pth line, which makes them importable without running that environment's own .pth files, so
the checkout's editable install is never seen."""
from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pschaos.harness.machinery.tools import REPO

USER_PACKAGE = 'raise RuntimeError("the user\'s own {name} package was imported instead of pschaos\'")\n'


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh environment's bin folder, a user's project folder with harness/ and reports/)."""
    base = tmp_path_factory.mktemp("user")
    assert REPO not in base.parents
    wheels, src = base / "wheels", base / "src"
    # built from a copy of the sources: a build in the checkout leaves build/ and egg-info there, and
    # files deleted from the sources would live on in build/lib and in the wheel
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv", "tools", "build", "out", "*.egg-info",
                                                             "__pycache__", ".pschaos", ".hypothesis", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(src)], check=True, capture_output=True, text=True, timeout=300)
    wheel = next(wheels.glob("pschaos-*.whl"))
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    lent = [p for p in site.getsitepackages() + [sysconfig.get_paths()["purelib"]] if Path(p).is_dir()]
    Path(purelib, "lent-dependencies.pth").write_text("\n".join(dict.fromkeys(lent)) + "\n")
    subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "-q", str(wheel)], check=True, timeout=300,
                   capture_output=True, text=True)
    project = base / "project"
    for name in ("harness", "reports"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text(USER_PACKAGE.format(name=name))
    return venv / "bin", project


def sh(bin_dir: Path, project: Path, *cmd: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PSCHAOS_LIBRARY_RUNS")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PSCHAOS_SEEN"] = str(project / "seen.jsonl")
    return subprocess.run(list(cmd), cwd=project, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_installed_wheel_scaffolds_runs_and_gates_a_suite(installed):
    bin_dir, project = installed
    where = sh(bin_dir, project, str(bin_dir / "python"), "-c",
               "import pschaos.harness, pschaos.scenarios as s; print(pschaos.harness.__file__, s.__file__)")
    assert where.returncode == 0 and str(REPO) not in where.stdout and "site-packages" in where.stdout, where

    v = sh(bin_dir, project, "pschaos", "--version")
    assert v.returncode == 0 and v.stdout.startswith("pschaos "), v

    init = sh(bin_dir, project, "pschaos", "init", "suite")
    assert init.returncode == 0 and (project / "suite" / "conftest.py").is_file(), init

    t = sh(bin_dir, project, str(bin_dir / "python"), "-m", "pytest", "suite", "--pschaos-backend", "sim",
           "--pschaos-out", "out/pytest", "-p", "no:cacheprovider", "-q")
    assert t.returncode == 0 and "1 passed, 1 skipped" in t.stdout, t.stdout[-3000:] + t.stderr[-3000:]
    seen = [json.loads(line) for line in (project / "seen.jsonl").read_text().splitlines()]
    reports = sorted(p.parent.name for p in (project / "out" / "pytest").glob("*/report.json"))
    assert [s["scenario"] for s in seen] == ["kill-primary"] and reports == ["kill-primary-1"]   # the hook saw every report

    r = sh(bin_dir, project, "pschaos", "run", "kill-primary", "--backend", "sim", "--json", "--quiet",
           "--out", "out/run/kill-primary")
    line = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and line["verdict"] == "pass" and line["exit"] == 0, r

    g = sh(bin_dir, project, "pschaos", "gate", "out/run", "--gate", "suite/gate.yaml")
    assert g.returncode == 0, g
    shutil.copytree(project / "out" / "run", project / "out" / "corrupt")
    (project / "out" / "corrupt" / "kill-primary" / "report.json").write_text("{not json")
    g = sh(bin_dir, project, "pschaos", "gate", "out/corrupt", "--gate", "suite/gate.yaml")
    assert g.returncode == 2 and "report.json cannot be read" in g.stderr, g
