"""The hand-off's phases add up to the client-observed unavailability and miss nothing silently."""
from pschaos.harness.checkers.migration import migration_metrics
from pschaos.harness.backends.sim.handoff_phases import call_latency, handoff_phases, median_phases

MID = "0.0.ab"


def ev(t, f, value, node="harness", type_="info", op=None):
    e = {"t": t, "node": node, "type": type_, "f": f, "value": value}
    if op is not None:
        e["op_id"] = op
    return e


def push(t, type_, op, shard, keys, routing_epoch=None):
    v = {"worker": "worker-0", "req_id": op, "shard": shard, "keys": keys}
    if routing_epoch is not None:
        v["routing_epoch"] = routing_epoch
    return ev(t, "push", v, "worker-0", type_, f"worker-0:{op}")


def history(switch=True):
    h = [ev(1.0, "migration-start", {"migration": MID, "src": [0, 1], "dst": [0, 1, 2, 3], "routing_epoch": 0}),
         push(1.1, "invoke", 1, 0, ["0.weight"]), push(1.104, "ok", 1, 0, ["0.weight"], 0),
         ev(2.0, "migration-copy-end", {"migration": MID}),
         ev(2.010, "migration-fence", {"migration": MID, "routing_epoch": 0}),
         ev(2.015, "migrate-fenced", {"migration": MID, "shard": 0}, "shard-0/0"),
         ev(2.030, "migrate-fenced", {"migration": MID, "shard": 1}, "shard-1/0"),
         ev(2.080, "migration-handoff", {"migration": MID})]
    if switch:
        h += [ev(2.085, "migration-switch", {"migration": MID, "routing_epoch": 1, "shards": [0, 1, 2, 3]}),
              push(2.100, "invoke", 2, 2, ["0.weight"]), push(2.112, "ok", 2, 2, ["0.weight"], 1)]
    return h


def test_phases_cut_at_the_events_and_sum_to_the_metric():
    (p,) = handoff_phases(history())
    assert p == {"migration": MID, "fence_cas": 10.0, "fence_calls": 20.0, "delta": 50.0, "switch_cas": 5.0,
                 "switch_to_ack": 27.0, "unavailable": 102.0}
    assert p["fence_calls"] + p["delta"] + p["switch_cas"] + p["switch_to_ack"] == p["unavailable"]
    assert migration_metrics(history())["migration_unavailable_samples_ms"] == [p["unavailable"]]


def test_a_migration_that_never_switched_has_no_phases_filled_in():
    assert handoff_phases(history(switch=False)) == []
    assert median_phases([[]])["delta"] is None


def test_call_latency_matches_invoke_and_ok_by_op():
    assert call_latency(history()) == {"push_p50_ms": 8.0, "pull_p50_ms": None}
