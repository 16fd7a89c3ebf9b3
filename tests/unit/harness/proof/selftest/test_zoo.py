"""The bug zoo against the tree as it is: every patch applies exactly once, so a refactor that
moves the code under a mutant fails here, in a second, not as a silently unmutated selftest run."""
from __future__ import annotations

from pathlib import Path

import pytest

from pschaos.harness.checkers.registry import CHECKERS
from pschaos.harness.proof.selftest.mutation import PACKAGES, PatchError, apply_patch, count_matches, load_zoo, mutant_copy, patch_problems
from pschaos.harness.machinery.tools import REPO

ZOO = load_zoo()
LIBRARY = {p.stem for p in (REPO / "scenarios").glob("*.yaml")}
ISSUE_10 = {"sync-early-ack", "no-epoch-fencing", "retry-applied-twice", "delta-get-and-clear", "log-overflow-drops",
            "manifest-before-data", "ssp-off-by-one", "version-across-epoch", "out-of-order-apply",
            "isr-drop-local-only", "adam-step-not-persisted", "rows-created-on-read"}


def test_the_zoo_holds_the_twelve_bugs_of_issue_10_at_least():
    assert len(ZOO) >= 12
    assert ISSUE_10 <= {m.name for m in ZOO}


@pytest.mark.parametrize("m", ZOO, ids=lambda m: m.name)
def test_every_edit_matches_exactly_once_in_the_current_tree(m):
    assert patch_problems(REPO, m.patch) == [], f"{m.name}: update tests/zoo/registry.py to the moved code"


@pytest.mark.parametrize("m", ZOO, ids=lambda m: m.name)
def test_every_patched_file_still_compiles(m):
    for rel, edits in m.patch.items():
        text = (REPO / rel).read_text()
        for old, new in edits:
            text = text.replace(old, new)
        assert text != (REPO / rel).read_text()
        compile(text, rel, "exec")


@pytest.mark.parametrize("m", ZOO, ids=lambda m: m.name)
def test_every_mutant_names_a_checker_and_library_scenarios(m):
    assert m.checker in CHECKERS or m.checker in ("progress", "nodes-back")      # or one the judge always runs
    assert m.scenarios and set(m.scenarios) <= LIBRARY, set(m.scenarios) - LIBRARY
    assert m.description and m.models
    sim_files = [p for p in m.patch if p.startswith("harness/backends/sim/")]
    # a shell mutant carries the twin's edit too; a core one needs none (the twin runs that code)
    if m.sim == "core":
        assert not sim_files
    elif m.sim == "shell":
        assert sim_files
    else:
        assert len(m.sim) > 20, "a mutant the twin cannot express says why"
    assert all(p.startswith(("psnodes/", "harness/backends/sim/")) for p in m.patch), "mutants patch the system under test"


def test_a_moved_text_breaks_the_patch_loudly_and_changes_nothing(tmp_path: Path):
    f = tmp_path / "psnodes" / "x.py"
    f.parent.mkdir()
    f.write_text("a = 1\nb = 1\n")
    with pytest.raises(PatchError, match="occurs 0 times"):
        apply_patch(tmp_path, {"psnodes/x.py": [("a = 1", "a = 2"), ("c = 1", "c = 2")]})
    assert f.read_text() == "a = 1\nb = 1\n"        # the first edit was not applied either
    with pytest.raises(PatchError, match="occurs 2 times"):
        apply_patch(tmp_path, {"psnodes/x.py": [("= 1", "= 2")]})
    with pytest.raises(PatchError, match="no such file"):
        apply_patch(tmp_path, {"psnodes/y.py": [("a", "b")]})


def test_edits_of_one_file_apply_in_order(tmp_path: Path):
    (tmp_path / "m.py").write_text("x = 1\n")
    patch = {"m.py": [("x = 1", "x = 2"), ("x = 2", "x = 3")]}
    assert [n for _, _, n in count_matches(tmp_path, patch)] == [1, 1]
    apply_patch(tmp_path, patch)
    assert (tmp_path / "m.py").read_text() == "x = 3\n"


def test_mutant_copy_patches_the_copy_not_the_source(tmp_path: Path):
    src = tmp_path / "src"
    for pkg in PACKAGES:
        (src / pkg).mkdir(parents=True)
        (src / pkg / "__init__.py").write_text("flag = False\n")
    root = mutant_copy(tmp_path / "copy", {"psnodes/__init__.py": [("flag = False", "flag = True")]}, src=src)
    assert (root / "psnodes" / "__init__.py").read_text() == "flag = True\n"
    assert (src / "psnodes" / "__init__.py").read_text() == "flag = False\n"


def test_mutant_copy_of_an_installed_pschaos(tmp_path: Path):
    """From a wheel install (site-packages/pschaos holds harness/, psnodes/ ... inside it) the copy
    is the whole package, patched at the same relative paths as in a checkout."""
    src = tmp_path / "site-packages" / "pschaos"
    for pkg in ("harness", "psnodes"):
        (src / pkg).mkdir(parents=True)
        (src / pkg / "__init__.py").write_text("flag = False\n")
    (src / "__init__.py").write_text("")
    root = mutant_copy(tmp_path / "copy", {"psnodes/__init__.py": [("flag = False", "flag = True")]}, src=src)
    assert (root / "pschaos" / "psnodes" / "__init__.py").read_text() == "flag = True\n"
    assert (src / "psnodes" / "__init__.py").read_text() == "flag = False\n"
