"""The suite's `xdist_group` marks hold: under `--dist loadgroup` (make test) a grouped test runs
on the one worker its group runs on. pytest-xdist 3.8 tags each grouped test by rewriting
`item._nodeid`, which pytest 9 no longer reads, so on pytest 9 every group was silently split and
tests meant to run one after another ran at once (CI, fresh clone of 38a7881: the Ray tests on
two workers removed each other's /tmp/ray). The dev extra pins pytest below 9 for that."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("xdist-group-check")


def test_a_grouped_test_carries_its_group_under_loadgroup(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by pytest-xdist with --dist loadgroup: no grouping is in play")
    assert request.node.nodeid.endswith("@xdist-group-check"), (
        f"pytest-xdist did not tag this grouped test ({request.node.nodeid}): its loadgroup is not honoured by "
        f"pytest {pytest.__version__}; the groups' tests run at once (pin pytest<9 with pytest-xdist 3.8)")


CLEANS = {"sigkill_then_clean", "soak", "reap", "sweep", "clean"}   # what runs `pschaos clean` or reaps dead disks
RAY = "pschaos.harness.fanout"      # Ray tasks' leftovers sweep runs `pschaos clean` (harness/fanout/leftovers.py)


def _group(node) -> str | None:
    for d in getattr(node, "decorator_list", []):
        if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("xdist_group") and d.args:
            return ast.literal_eval(d.args[0])
    return None


def test_every_test_that_runs_pschaos_clean_runs_in_its_group():
    """`pschaos clean` reaps every orphaned process and dead disk on the machine, not only its
    test's: two at once took each other's (CI of 14be8b9: the interrupt soak's clean unmounted
    the disk test_pschaos_clean_unmounts_a_killed_runs_disks was to see its own clean unmount)."""
    root = Path(__file__).resolve().parents[1] / "integration"
    loose = []
    for f in sorted(root.glob("test_*.py")):
        tree = ast.parse(f.read_text())
        module = next((ast.unparse(n.value) for n in tree.body if isinstance(n, ast.Assign)
                       and any(getattr(t, "id", "") == "pytestmark" for t in n.targets)), "")
        on_ray = any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith(RAY) for n in tree.body)
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef) or not fn.name.startswith("test"):
                continue
            used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {
                n.func.attr for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
            said = {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant)}
            if used & CLEANS or "clean" in said or on_ray:
                if _group(fn) != "pschaos-clean" and "xdist_group('pschaos-clean')" not in module:
                    loose.append(f"{f.name}::{fn.name}")
    assert not loose, f"mark these @pytest.mark.xdist_group(\"pschaos-clean\"): {loose}"
