"""Checkers are pure functions of a history: each is shown to pass and to fail."""
from harness.checkers import CHECKERS, compose, run_check
from harness.checkers.base import Verdict
from harness.metrics import check_bounds, compute


def ev(t, f, value, type_="info", node="n"):
    return {"t": t, "node": node, "type": type_, "f": f, "value": value}


def ok(t, worker, req, shard, epoch, seq, node="shard-0/0", dup=False):
    return ev(t, "push", {"worker": worker, "req_id": req, "shard": shard, "epoch": epoch, "seq": seq,
                          "node": node, "duplicate": dup}, "ok", worker)


def final(node, shard, role, epoch, seq, applied, pushes=None, checksum="c"):
    n = sum(hi - lo + 1 for rs in applied.values() for lo, hi in rs)
    return ev(99, "final-state", {"node": node, "shard": shard, "alive": True, "role": role, "epoch": epoch,
                                  "seq": seq, "checksum": checksum, "applied": applied,
                                  "pushes": n if pushes is None else pushes})


CTX = {"replication": "sync", "workers": ["worker-0"], "steps": 10, "failover_budget_ms": 800}


def test_no_lost_acks_pass_and_fail():
    h = [ok(1, "worker-0", 1, 0, 1, 1), ok(2, "worker-0", 2, 0, 1, 2),
         final("shard-0/1", 0, "primary", 2, 2, {"worker-0": [[1, 2]]})]
    assert CHECKERS["no-lost-acks"](h, CTX).valid is True
    h[-1] = final("shard-0/1", 0, "primary", 2, 1, {"worker-0": [[1, 1]]})
    v = CHECKERS["no-lost-acks"](h, CTX)
    assert v.valid is False and v.details["lost"] == 1 and v.details["examples"][0]["req_id"] == 2


def test_no_lost_acks_unknown_without_a_primary():
    h = [ok(1, "worker-0", 1, 0, 1, 1)]
    assert CHECKERS["no-lost-acks"](h, CTX).valid == "unknown"


def test_async_mode_allows_a_bounded_window():
    h = [ok(1, "worker-0", 1, 0, 1, 1), ev(1.5, "promote", {"shard": 0, "epoch": 2, "node": "shard-0/1"}),
         final("shard-0/1", 0, "primary", 2, 0, {})]
    assert CHECKERS["no-lost-acks"](h, {**CTX, "replication": "async", "max_lag": 4}).valid is True
    assert CHECKERS["no-lost-acks"](h, {**CTX, "replication": "async", "max_lag": 0}).valid is False


def test_single_primary_detects_split_brain_and_epoch_regression():
    good = [ev(0, "promote", {"shard": 0, "epoch": 1, "node": "shard-0/0"}),
            ev(1, "promote", {"shard": 0, "epoch": 2, "node": "shard-0/1"}),
            ok(2, "worker-0", 1, 0, 2, 5, node="shard-0/1")]
    assert CHECKERS["single-primary"](good, CTX).valid is True
    split = good + [ok(3, "worker-0", 2, 0, 2, 6, node="shard-0/0")]
    assert CHECKERS["single-primary"](split, CTX).valid is False
    back = good + [ev(4, "promote", {"shard": 0, "epoch": 2, "node": "shard-0/2"})]
    assert CHECKERS["single-primary"](back, CTX).details["epoch_regressions"]


def test_exactly_once():
    h = [ok(1, "worker-0", 1, 0, 1, 1), ok(2, "worker-0", 1, 0, 2, 1, dup=True),
         final("shard-0/0", 0, "primary", 2, 1, {"worker-0": [[1, 1]]})]
    assert CHECKERS["exactly-once"](h, CTX).valid is True
    twice = h + [ok(3, "worker-0", 1, 0, 2, 2)]
    assert CHECKERS["exactly-once"](twice, CTX).valid is False
    counted = h[:2] + [final("shard-0/0", 0, "primary", 2, 2, {"worker-0": [[1, 1]]}, pushes=2)]
    assert CHECKERS["exactly-once"](counted, CTX).details["count_mismatch"]


def test_replicas_match():
    h = [final("shard-0/0", 0, "primary", 1, 5, {}), final("shard-0/1", 0, "replica", 1, 5, {})]
    assert CHECKERS["replicas-match"](h, CTX).valid is True
    h.append(final("shard-0/2", 0, "replica", 1, 5, {}, checksum="other"))
    assert CHECKERS["replicas-match"](h, CTX).valid is False


def test_converged_and_catchup_and_failover():
    done = ev(9, "train-done", {"worker": "worker-0", "steps": 10, "final_loss": 0.05, "target_loss": 0.1})
    assert CHECKERS["converged"]([done], CTX).valid is True
    high = ev(9, "train-done", {"worker": "worker-0", "steps": 10, "final_loss": 0.5, "target_loss": 0.1})
    assert CHECKERS["converged"]([high], CTX).valid is False
    assert CHECKERS["converged"]([], CTX).valid is False
    stop = ev(1, "fault-start", {"kind": "stop", "target": "shard-0/1"})
    sync = ev(2, "sync", {"dst": "shard-0/1", "bytes": 100, "changed_bytes": 95, "snapshot_bytes": 1000,
                          "kind": "delta"})
    assert CHECKERS["catch-up-by-delta"]([stop, sync], {}).valid is True
    snap = ev(2, "sync", {"dst": "shard-0/1", "bytes": 900, "changed_bytes": 900, "snapshot_bytes": 1000,
                          "kind": "snapshot"})
    assert CHECKERS["catch-up-by-delta"]([stop, snap], {}).valid is False
    kill = ev(1.0, "fault-start", {"kind": "kill", "target": "shard-0/0", "shard": 0, "epoch": 1,
                                   "was_primary": True})
    h = [kill, ok(1.4, "worker-0", 1, 0, 2, 3)]
    v = CHECKERS["failover-budget"](h, CTX)
    assert v.valid is True and abs(v.details["failovers"][0]["ms"] - 400) < 1
    assert CHECKERS["failover-budget"]([kill, ok(2.0, "worker-0", 1, 0, 2, 3)], CTX).valid is False


def test_a_crashing_checker_is_unknown_never_a_pass():
    def boom(h, ctx):
        raise KeyError("x")
    v = run_check(boom, [], {})
    assert v.valid == "unknown" and "KeyError" in v.details["error"]
    assert compose({"a": Verdict(True), "b": v}) == "unknown"
    assert compose({"a": Verdict(False), "b": v}) is False


def test_metrics_and_bounds():
    h = [ok(1, "worker-0", 1, 0, 1, 1), final("shard-0/0", 0, "primary", 1, 1, {"worker-0": [[1, 1]]})]
    m = compute(h, CTX)
    assert m["acked_updates"] == 1 and m["lost_acked_updates"] == 0
    b = check_bounds(m, ["lost_acked_updates == 0", "acked_updates > 5", "nope.x <= 1"])
    assert [x["holds"] for x in b] == [True, False, False]


def test_converge_baseline():
    done = ev(9, "train-done", {"worker": "worker-0", "steps": 10, "final_loss": 0.12, "target_loss": 0.1})
    assert CHECKERS["converge-baseline"]([done], {"baseline_loss": 0.10, "baseline_margin": 0.05}).valid is True
    assert CHECKERS["converge-baseline"]([done], {"baseline_loss": 0.05, "baseline_margin": 0.05}).valid is False
    assert CHECKERS["converge-baseline"]([done], {"baseline_loss": None}).valid == "unknown"
