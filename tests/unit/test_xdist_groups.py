"""The suite's `xdist_group` marks hold: under `--dist loadgroup` (make test) a grouped test runs
on the one worker its group runs on. pytest-xdist 3.8 tags each grouped test by rewriting
`item._nodeid`, which pytest 9 no longer reads, so on pytest 9 every group was silently split and
tests meant to run one after another ran at once (CI, fresh clone of 38a7881: the Ray tests on
two workers removed each other's /tmp/ray). The dev extra pins pytest below 9 for that."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("xdist-group-check")


def test_a_grouped_test_carries_its_group_under_loadgroup(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not run by pytest-xdist with --dist loadgroup: no grouping is in play")
    assert request.node.nodeid.endswith("@xdist-group-check"), (
        f"pytest-xdist did not tag this grouped test ({request.node.nodeid}): its loadgroup is not honoured by "
        f"pytest {pytest.__version__}; the groups' tests run at once (pin pytest<9 with pytest-xdist 3.8)")
