"""Integration fixtures: real etcd, real node processes on loopback, torn down after each test."""
from __future__ import annotations

import uuid

import pytest

from harness.backend_process import ProcessBackend
from harness.scenario import ClusterSpec
from harness.tools import find

pytestmark = pytest.mark.integration


def pytest_collection_modifyitems(items):
    for it in items:
        if "integration" in str(it.fspath):
            it.add_marker(pytest.mark.integration)


@pytest.fixture
def make_cluster(tmp_path):
    if find("etcd") is None:
        pytest.skip("etcd is not installed (apt-get install etcd-server, or make install)")
    made: list[ProcessBackend] = []

    def make(tables=None, **spec) -> ProcessBackend:
        spec.setdefault("workers", 0)
        spec.setdefault("checkpoint_interval_s", 3600)
        be = ProcessBackend(ClusterSpec(**spec), tmp_path / f"c{len(made)}", f"test-{uuid.uuid4().hex[:8]}", 7,
                            tables=tables)
        made.append(be)
        be.start()
        return be

    yield make
    for be in made:
        be.teardown()
