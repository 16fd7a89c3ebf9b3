"""Bug 4.7 on a real cluster: after a long mlp run the applied-key set is a few intervals per
(worker process, shard), and a replica restarted mid-run catches up by delta within 1.1x of the
bytes that changed (the applied set no longer swells every delta header and checksum)."""
import json
import time

from pschaos.harness.history.events import read_events
from pschaos.harness.machinery.procs import wait_until

from .test_failover import settle

STEPS = 1500


def steps_done(be, worker: str) -> int:
    try:
        return sum(1 for e in read_events(be.events_path(worker)) if e["f"] == "train-step")
    except FileNotFoundError:
        return 0


def test_long_mlp_run_keeps_applied_intervals_few_and_catchup_within_bound(make_cluster):
    be = make_cluster(shards=2, copies=2, workers=2, replication="sync", training="async", model="mlp")
    t0 = time.monotonic()
    be.start_workers(STEPS)
    assert wait_until(lambda: steps_done(be, "worker-0") >= STEPS // 3, 60, 0.2), "workers did not get going"
    rep = next(n for n in be.cfg.shard_nodes(0) if n != be.routing()[0].primary)
    be.stop(rep)                                   # graceful: writes its local checkpoint
    at = steps_done(be, "worker-0")
    assert wait_until(lambda: steps_done(be, "worker-0") >= at + STEPS // 4, 60, 0.2)
    be.restart(rep)                                # catches up by delta while the workers run on
    assert be.wait_workers(120), "workers did not finish"
    run_s = time.monotonic() - t0
    figures = {"run_s": round(run_s, 1)}
    for shard in range(be.cfg.shards):
        settle(be, shard)
        sts = [be.client.status(n, checksum=True, applied=True, audit=True) for n in be.cfg.shard_nodes(shard)]
        assert len({s.checksum for s in sts}) == 1, [s.checksum for s in sts]
        for s in sts:
            applied = json.loads(s.applied_json)
            assert sorted(k.split("#")[0] for k in applied) == ["worker-0", "worker-1"], applied
            worst = max(len(rs) for rs in applied.values())
            keys = sum(hi - lo + 1 for rs in applied.values() for lo, hi in rs)
            figures[f"{s.node} intervals"] = {k.split("#")[0]: len(rs) for k, rs in applied.items()}
            assert worst <= 3, applied                 # one each, plus a gap per unknown outcome
            assert keys == s.pushes >= 2 * STEPS
            audit = json.loads(s.audit_json)
            assert sum(audit.values()) == s.pushes and set(audit) == {"worker-0", "worker-1"}
    syncs = [e["value"] for e in read_events(be.events_path(be.routing()[0].primary))
             if e["f"] == "sync" and e["value"]["dst"] == rep]
    assert syncs, f"no catch-up of {rep} recorded"
    c = syncs[-1]
    figures["catchup"] = {k: c[k] for k in ("kind", "from_seq", "to_seq", "bytes", "changed_bytes", "snapshot_bytes")}
    print("\nlong-run figures:", json.dumps(figures))
    assert c["kind"] == "delta" and c["from_seq"] > 0, c
    assert c["bytes"] <= 1.1 * c["changed_bytes"], c
