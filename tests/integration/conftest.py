"""Integration fixtures: real etcd, real node processes on loopback, torn down after each test.

Clusters come from the pschaos plugin's `pschaos_cluster` fixture; here only the skip when etcd is
absent and a default without periodic checkpoints (tests take them explicitly).
"""
from __future__ import annotations

import pytest

from pschaos.harness.machinery.tools import find


def pytest_collection_modifyitems(items):
    for it in items:
        if "integration" in str(it.fspath):
            it.add_marker(pytest.mark.integration)


@pytest.fixture
def make_cluster(pschaos_cluster):
    if find("etcd") is None:
        pytest.skip("etcd is not installed (apt-get install etcd-server, or make install)")

    def make(tables=None, **spec):
        spec.setdefault("checkpoint_interval_s", 3600)
        return pschaos_cluster(tables=tables, **spec)

    return make
