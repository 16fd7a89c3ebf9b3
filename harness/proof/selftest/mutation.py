"""Mutants: a bug planted in a temporary copy of the code, never switched on in the product.

A mutant is a small patch, {relative path: [(old, new), ...]}, applied to a copy of the
packages. Each `old` must occur exactly once in its file: a refactor that moves the code then
breaks the patch loudly (PatchError names the file and the text) instead of silently testing
the unmodified code and calling the checkers strong. The copy runs the harness and psnodes from
itself (PYTHONPATH at the copy), so its nodes, workers and simulated shards import the patched
code. `tests/zoo/registry.py` lists the bug zoo; `pschaos selftest` runs the suite against it.
"""
from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.tools import REPO

PACKAGES = ("pschaos", "harness", "psnodes", "netfaults", "diskfaults", "reports", "scenarios")
ZOO = REPO / "tests" / "zoo" / "registry.py"

Patches = dict[str, list[tuple[str, str]]]


class PatchError(HarnessError):
    """A patch's text does not occur exactly once in its file: the code moved under the mutant."""


@dataclass(frozen=True)
class Mutant:
    """One bug of the zoo: what it is, the real-world bug it models, its patch, who should catch it.

    `sim` says how the twin expresses it: "core" (the decision lives in psnodes/core or another
    module both backends run, so one patch mutates both), "shell" (the patch carries an edit of
    the sim's own port of that code), or a sentence saying why the sim cannot express it."""

    name: str
    description: str
    models: str
    patch: Patches
    checker: str
    scenarios: tuple[str, ...]
    sim: str = "core"
    notes: str = ""


def count_matches(root: Path, patch: Patches) -> list[tuple[str, str, int]]:
    """(path, old text, occurrences) for every edit of `patch` against the tree at `root`,
    each counted in the file as the edits before it left it (edits of one file apply in order)."""
    out = []
    for rel, edits in patch.items():
        p = root / rel
        text = p.read_text() if p.is_file() else None
        for old, new in edits:
            n = -1 if text is None else text.count(old)
            out.append((rel, old, n))
            if n == 1:
                text = text.replace(old, new)
    return out


def patch_problems(root: Path, patch: Patches) -> list[str]:
    """What keeps `patch` from applying cleanly at `root` ([] when every edit matches once)."""
    bad = []
    for rel, old, n in count_matches(root, patch):
        if n == -1:
            bad.append(f"{rel}: no such file")
        elif n != 1:
            bad.append(f"{rel}: the text to replace occurs {n} times, not once: {old[:120]!r}")
    return bad


def apply_patch(root: Path, patch: Patches) -> None:
    """Apply `patch` to the tree at `root`, or raise PatchError before changing any file."""
    bad = patch_problems(root, patch)
    if bad:
        raise PatchError("mutant patch does not apply (the code moved; update tests/zoo/registry.py): "
                         + "; ".join(bad))
    for rel, edits in patch.items():
        p = root / rel
        text = p.read_text()
        for old, new in edits:
            text = text.replace(old, new)
        p.write_text(text)


def mutant_copy(dest: Path, patch: Patches, src: Path = REPO) -> Path:
    """Copy the packages of `src` to `dest` and apply `patch` there; returns `dest`, the folder a
    run of the mutant takes as its PYTHONPATH and working folder. `src` is a checkout (harness/,
    psnodes/ ... beside pschaos/), or an installed pschaos package (site-packages/pschaos, which
    holds them inside): a patch's paths are relative to the folder that holds harness/ either way."""
    dest.mkdir(parents=True, exist_ok=True)
    if not (src / "pschaos" / "__init__.py").is_file():          # installed: the whole package, as one
        shutil.copytree(src, dest / "pschaos", ignore=shutil.ignore_patterns("__pycache__"))
        apply_patch(dest / "pschaos", patch)
        return dest
    for pkg in PACKAGES:
        shutil.copytree(src / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    if (src / "tools").exists() and not (dest / "tools").exists():
        (dest / "tools").symlink_to(src / "tools")     # Toxiproxy, built once into the real tree
    apply_patch(dest, patch)
    return dest


def load_zoo(path: Path = ZOO) -> list[Mutant]:
    """The zoo's mutants, from the source checkout's tests/zoo/registry.py (`MUTANTS`)."""
    if not path.is_file():
        raise HarnessError(f"the bug zoo is not here: {path} is missing (the built-in zoo comes with a source "
                           "checkout of pschaos; give your own with --zoo FILE, a Python file whose MUTANTS "
                           "lists pschaos.harness.proof.selftest.mutation.Mutant objects)")
    spec = importlib.util.spec_from_file_location("pschaos_zoo_registry", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mutants = list(mod.MUTANTS)
    names = [m.name for m in mutants]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise HarnessError(f"{path}: mutant names repeat: {', '.join(dup)}")
    return mutants
