"""Issue 15, hostile input never changes state: the gRPC fuzzer against a real 1-shard x 3-copy
cluster (real etcd, real node processes). 1600 hostile requests, to the primary and both
replicas: no violation (no UNKNOWN/INTERNAL answer, no refusal that fails to name its field, no
refused request that changed a copy, no accepted invalid push or forged Replicate, no delayed
change, no divergence, failover, hang or dead node, no ERROR or traceback in a node's log), and
every request without the right token refused UNAUTHENTICATED.

The evidence must be more than refusals at the door: per method, enough requests reach the
handler's content checks (answered OK, or refused by a check naming a field of the content,
not by parsing, the token, routing or a Replicate's sender checks), most structured ones among
them; the specials (harness/proof/fuzz/cases.SPECIALS) were all sent; and what the runner set aside as
noise (a loaded machine explains it as well) is at most 1% of the requests, every item listed."""
import pytest

from pschaos.harness.proof.fuzz import cases
from pschaos.harness.proof.fuzz.report import format_text
from pschaos.harness.proof.fuzz.runner import FuzzRun, prepare

REQUESTS = 1600        # Push and Replicate get twice the share: ~375 each, ~190 of the others, 101 specials
#: requests per method answered OK or by a content check (about two thirds of what a run reaches)
MIN_REACHED = {"Push": 130, "Replicate": 90, "Pull": 70, "Snapshot": 65, "Status": 70, "Echo": 100}
#: of the structured requests (3/5 of a method's share): the part that reaches the content checks
MIN_STRUCTURED_SHARE = {"Push": 0.5, "Replicate": 0.5, "Pull": 0.5, "Snapshot": 0.5, "Status": 0.7}


@pytest.mark.timeout(300)
def test_hostile_requests_change_nothing(make_cluster, pytestconfig):
    be = make_cluster(shards=1, copies=3, tables={"emb": 8})
    prepare(be)
    seed = pytestconfig.getoption("pschaos_seed")
    run = FuzzRun(be, seed, REQUESTS, progress_every=10 ** 9)
    s = run.run()
    report = format_text(s)
    assert s["sent"] == REQUESTS and not s["stopped_early"], report
    assert not s["violation_counts"], report
    for method, least in MIN_REACHED.items():
        r = s["reach"][method]
        assert r["reached"] >= least, (method, r, report)
        st = r["by_form"]["structured"]
        if method in MIN_STRUCTURED_SHARE:
            assert st["reached"] >= MIN_STRUCTURED_SHARE[method] * st["sent"], (method, r, report)
    specials = [r for r in run.records if r["form"] == "special" and "replay_of" not in r]
    assert len(specials) == REQUESTS // cases.SPECIAL_EVERY + 1, report
    # both replicas were reached (a failover on a loaded machine makes the old primary a third)
    assert len({r["target"] for r in run.records if r["role"] != "primary"}) >= 2, report
    noise = s["noise"]
    assert noise["count"] <= 0.01 * s["sent"] and len(noise["items"]) == noise["count"], report
    u = s["unauthenticated"]
    assert u["sent"] >= 50 and u["refused"] == u["sent"], report
