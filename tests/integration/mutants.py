"""A temporary copy of the project with a bug planted in it, and a way to run scenarios there.

The product never switches a bug on: a test copies the code, patches the copy (each patch must
match exactly once, so a refactor that moves the code breaks the test loudly instead of
silently testing nothing) and runs the harness from the copy, whose nodes and workers import
the patched psnodes. The copy and the patch are harness/proof/selftest/mutation.py's, shared with the bug zoo
(tests/zoo/registry.py) and `pschaos selftest`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pschaos.harness.proof.selftest.mutation import PACKAGES, PatchError, mutant_copy

__all__ = ["PACKAGES", "PatchError", "mutant_copy", "run_scenario"]


def run_scenario(root: Path, scenario: Path, out: Path, seed: int = 1, timeout: float = 400,
                 backend: str = "process") -> tuple[int, dict, str]:
    """`pschaos run` from `root` (its own harness and psnodes); returns exit code, report, output."""
    env = dict(os.environ, PYTHONPATH=str(root))
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(scenario), "--seed", str(seed),
                        "--out", str(out), "--quiet", "--backend", backend], cwd=root, env=env, capture_output=True, text=True,
                       timeout=timeout)
    rep = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return p.returncode, rep, p.stdout + p.stderr[-3000:]
