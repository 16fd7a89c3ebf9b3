"""A temporary copy of the project with a bug planted in it, and a way to run scenarios there.

The product never switches a bug on: a test copies the code, patches the copy (each patch must
match exactly once, so a refactor that moves the code breaks the test loudly instead of
silently testing nothing) and runs the harness from the copy, whose nodes and workers import
the patched psnodes.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.tools import REPO

PACKAGES = ("harness", "psnodes", "netfaults", "reports", "scenarios")


def mutant_copy(dest: Path, patches: dict[str, list[tuple[str, str]]]) -> Path:
    """Copy the packages to `dest` and apply {relative path: [(old, new), ...]} there."""
    dest.mkdir(parents=True, exist_ok=True)
    for pkg in PACKAGES:
        shutil.copytree(REPO / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    if (REPO / "tools").exists() and not (dest / "tools").exists():
        (dest / "tools").symlink_to(REPO / "tools")     # Toxiproxy, built once into the real tree
    for rel, edits in patches.items():
        p = dest / rel
        text = p.read_text()
        for old, new in edits:
            if text.count(old) != 1:
                raise AssertionError(f"patch for {rel} matches {text.count(old)} times, not once: {old!r}")
            text = text.replace(old, new)
        p.write_text(text)
    return dest


def run_scenario(root: Path, scenario: Path, out: Path, seed: int = 1, timeout: float = 400,
                 backend: str = "process") -> tuple[int, dict, str]:
    """`pschaos run` from `root` (its own harness and psnodes); returns exit code, report, output."""
    env = dict(os.environ, PYTHONPATH=str(root))
    p = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--seed", str(seed),
                        "--out", str(out), "--quiet", "--backend", backend], cwd=root, env=env, capture_output=True, text=True,
                       timeout=timeout)
    rep = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return p.returncode, rep, p.stdout + p.stderr[-3000:]
