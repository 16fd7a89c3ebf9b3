"""Issue 15, hostile input never changes state: the gRPC fuzzer against a real 1-shard x 3-copy
cluster (real etcd, real node processes). A few hundred hostile requests per method, to the
primary and a replica: no violation (no UNKNOWN/INTERNAL answer, no refused request that
changed a copy, no accepted invalid push, no divergence, failover, hang or dead node), and
every request without the right token refused UNAUTHENTICATED."""
import pytest

from harness.fuzz.report import format_text
from harness.fuzz.runner import FuzzRun, prepare

REQUESTS = 1600        # Push and Replicate get twice the share: ~400 each, ~200 of the others


@pytest.mark.timeout(240)
def test_hostile_requests_change_nothing(make_cluster, pytestconfig):
    be = make_cluster(shards=1, copies=3, tables={"emb": 8})
    prepare(be)
    seed = pytestconfig.getoption("seed")
    s = FuzzRun(be, seed, REQUESTS, progress_every=10 ** 9).run()
    report = format_text(s)
    assert s["sent"] == REQUESTS and not s["stopped_early"], report
    assert not s["violation_counts"], report
    assert all(sum(c.values()) >= 100 for c in s["counts"].values()), report
    u = s["unauthenticated"]
    assert u["sent"] >= 50 and u["refused"] == u["sent"], report
