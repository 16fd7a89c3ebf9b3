"""The elastic-shard checks can fail: two shards acking one key in one routing epoch, a moved
audit bucket below the acks that carried it, a duplicate credited to the shard that applied it;
and missing evidence is unknown, never a pass."""
from pschaos.harness.checkers.acks import no_lost_acks
from pschaos.harness.checkers.migration import migration_metrics, single_owner

from tests.unit.histories import ev, final, ok


def acked_at(t, shard, req, routing_epoch, keys, **extra):
    e = ok(t, "worker-0", req, shard, 1, req, node=f"shard-{shard}/0", keys=keys)
    e["value"]["routing_epoch"] = routing_epoch
    e["value"].update(extra)
    return e


def test_two_owners_acking_one_key_in_one_routing_epoch_fail():
    h = [acked_at(1.0, 0, 1, 1, ["0.weight"]), acked_at(1.1, 2, 1, 1, ["0.weight"])]
    v = single_owner(h, {})
    assert v.valid is False
    assert v.details["two_owners"] == [{"key": "0.weight", "routing_epoch": 1, "shards": [0, 2]}]


def test_one_key_acked_by_its_old_and_new_owner_in_different_epochs_passes():
    h = [acked_at(1.0, 0, 1, 0, ["0.weight"]), acked_at(2.0, 2, 1, 1, ["0.weight"])]
    v = single_owner(h, {})
    assert v.valid is True and v.details["routing_epochs"] == [0, 1]


def test_an_ack_without_its_routing_epoch_is_no_evidence():
    h = [acked_at(1.0, 0, 1, 0, ["0.weight"]), ok(1.1, "worker-0", 2, 0, 1, 2, keys=("0.weight",))]
    assert single_owner(h, {}).valid == "unknown"
    assert single_owner([], {}).valid == "unknown"


def _run(bucket_count: int, with_buckets: bool = True) -> list[dict]:
    """Worker-0 pushed twice to shard 0 carrying bucket m1; the bucket moved to shard 2, whose final
    state reports `bucket_count` for it."""
    keys = ["0.weight", "__audit__/0", "__audit__/m1"]
    h = [ev(0, "run-start", {}), acked_at(1.0, 0, 1, 0, keys), acked_at(1.1, 0, 2, 0, keys)]
    f0 = final("shard-0/0", 0, "primary", 1, 2, {"worker-0#1": [[1, 2]]})
    f2 = final("shard-2/0", 2, "primary", 1, 1, {})
    if with_buckets:
        f0["value"]["buckets"] = {}
        f2["value"]["buckets"] = {"__audit__/m1": {"worker-0": bucket_count}}
    return h + [f0, f2]


def test_a_moved_bucket_short_of_its_acks_is_a_loss():
    assert no_lost_acks(_run(2), {}).valid is True
    v = no_lost_acks(_run(1), {})
    assert v.valid is False and v.details["lost"] == 1
    assert v.details["bucket_short"] == [{"bucket": "__audit__/m1", "worker": "worker-0", "acked": 2, "count": 1,
                                          "owner_reported": True}]


def test_no_bucket_counts_at_all_is_unknown():
    assert no_lost_acks(_run(2, with_buckets=False), {}).valid == "unknown"


def test_a_duplicate_from_a_migrated_applied_set_is_credited_to_the_shard_that_applied_it():
    """Push 3 was applied by shard 0 (its ack lost), re-routed to shard 2, which answered it as a
    duplicate from shard 0's applied set: it counts in shard 0's audit, not shard 2's."""
    h = [ev(0, "run-start", {}), acked_at(1.0, 0, 1, 0, ["0.weight"]),
         acked_at(3.0, 2, 3, 1, ["0.weight"], origin=0, applied_on=0, duplicate=True)]
    states = [final("shard-0/0", 0, "primary", 1, 3, {"worker-0#1": [[1, 1], [3, 3]]}),
              final("shard-2/0", 2, "primary", 1, 0, {})]
    assert no_lost_acks(h + states, {}).valid is True
    states[0] = final("shard-0/0", 0, "primary", 1, 1, {"worker-0#1": [[1, 1]]})     # 3 never applied
    assert no_lost_acks(h + states, {}).valid is False


def test_migration_metrics_from_the_events():
    h = [ev(1.0, "migration-start", {"migration": "0.0", "src": [0, 1], "dst": [0, 1, 2], "routing_epoch": 0}),
         ev(2.0, "migration-fence", {"migration": "0.0", "routing_epoch": 0, "sources": [0, 1]}),
         ev(2.1, "migration-switch", {"migration": "0.0", "routing_epoch": 1, "shards": [0, 1, 2], "fenced_ms": 100}),
         ev(2.2, "migration-done", {"migration": "0.0", "bytes": 300, "key_bytes": 150, "keys": 3, "retired": []})]
    m = migration_metrics(h)
    assert m["migrations"] == 1 and m["migration_bytes_ratio"] == 2.0
    # no ack of a moved key: unobserved, not filled in with the coordinator's fence -> switch
    assert m["migration_unavailable_ms"]["n"] == 0 and m["migration_unavailable_unobserved"] == 1
    assert m["migration_fenced_ms"]["p50"] == 100.0


def test_two_parts_of_one_push_are_two_identities_for_the_buckets():
    """Push 5 numbered for shard 0 was split: part [0] and part [2, 0] both ended on shard 0 carrying
    bucket m1. Both were acked, so m1 must count 2; a count of 1 is a lost part (review 1a)."""
    keys = ["0.weight", "__audit__/0", "__audit__/m1"]
    h = [ev(0, "run-start", {}), acked_at(1.0, 0, 5, 1, keys, origin=0, part=[0]),
         acked_at(1.1, 0, 5, 2, keys, origin=0, part=[2, 0])]
    f0 = final("shard-0/0", 0, "primary", 1, 2, {"worker-0#1@0/0": [[5, 5]], "worker-0#1@0/2/0": [[5, 5]]})
    f0["value"]["buckets"] = {"__audit__/m1": {"worker-0": 2}}
    assert no_lost_acks(h + [f0], {}).valid is True
    f0["value"]["buckets"] = {"__audit__/m1": {"worker-0": 1}}
    assert no_lost_acks(h + [f0], {}).valid is False


def test_a_duplicate_part_is_not_credited_by_a_sibling_parts_applied_key():
    """Part [2] of push 5 answered as a duplicate from shard 2's applied set on shard 0: only the key
    of that part (or of an ancestor, `applied_as`) proves it, never its sibling part [0]."""
    h = [ev(0, "run-start", {}),
         acked_at(2.0, 0, 5, 2, ["0.weight", "__audit__/0"], origin=0, part=[2], applied_on=2, duplicate=True)]
    states = [final("shard-0/0", 0, "primary", 2, 1, {"worker-0#1@0/0": [[5, 5]]})]
    retired = ev(50, "retired-state", {"node": "shard-2/0", "shard": 2, "alive": True, "role": "primary", "epoch": 1,
                                       "seq": 1, "applied": {"worker-0#1@0/0": [[5, 5]]}, "audit": {"worker-0": 1}})
    assert no_lost_acks(h + states + [retired], {}).valid is False
    retired["value"]["applied"] = {"worker-0#1@0/2": [[5, 5]]}
    assert no_lost_acks(h + states + [retired], {}).valid is True


def _moving_name() -> str:
    from pschaos.psnodes.placement import owner
    return next(f"p{i}" for i in range(200) if owner(f"p{i}", (0, 1)) == 0 and owner(f"p{i}", (0, 1, 2)) == 2)


def _timeline(ack_seq: int, fenced=(0, 1), ack_node_epoch: int = 1, invoked_at: float = 1.5) -> list[dict]:
    """2 -> 3: shard 0's fence entry is on its ISR at seq 10 (primary epoch 1), the switch at t=3;
    shard 0 acked key K (moving 0 -> 2) at seq `ack_seq`, labelled routing epoch 0."""
    k = _moving_name()
    h = [ev(0, "run-start", {}),
         ev(1.0, "migration-start", {"migration": "m", "src": [0, 1], "dst": [0, 1, 2], "routing_epoch": 0}),
         ev(2.0, "migration-fence", {"migration": "m", "routing_epoch": 0, "sources": [0, 1]})]
    h += [ev(2.1, "migrate-fenced", {"shard": s, "migration": "m", "seq": 10, "epoch": 1}) for s in fenced]
    h += [ev(3.0, "migration-switch", {"migration": "m", "routing_epoch": 1, "shards": [0, 1, 2]}),
          ev(invoked_at, "push", {"worker": "worker-0", "req_id": 7, "shard": 0, "keys": [k]}, "invoke", op="o1")]
    a = acked_at(3.5, 0, 7, 0, [k])
    a["op_id"] = "o1"
    a["value"].update(seq=ack_seq, epoch=ack_node_epoch)
    return h + [a, acked_at(4.0, 2, 8, 1, [k])]


def test_a_source_acking_a_moved_key_after_its_fence_fails_single_owner():
    """Shard 0 acks K at routing epoch 0 after its fence, shard 2 at epoch 1: each epoch has one
    acking shard, so the per-epoch grouping passed; the timeline does not (review section 2)."""
    assert single_owner(_timeline(9), {}).valid is True
    v = single_owner(_timeline(12), {})
    assert v.valid is False and v.details["after_fence"][0]["why"] == "acked after its fence"
    v = single_owner(_timeline(9, invoked_at=3.2), {})         # invoked after the switch
    assert v.valid is False and v.details["after_fence"][0]["why"] == "invoked after the switch"


def test_a_switched_migration_without_a_sources_fence_point_is_unknown():
    assert single_owner(_timeline(9, fenced=(0,)), {}).valid == "unknown"


def test_an_ack_by_a_shard_that_does_not_own_the_key_in_its_epoch_fails():
    h = _timeline(9)
    h[-1]["value"]["shard"] = 1                                   # epoch 1's owner is shard 2
    assert single_owner(h, {}).valid is False


def _bucket_between(a: int, b: int, src=(0, 1), dst=(0, 1, 2, 3)) -> str:
    from pschaos.psnodes.placement import bucket_names, owner
    return next(n for n in bucket_names() if owner(n, src) == a and owner(n, dst) == b)


def _moved_run(reports: dict[int, dict], keys_extra=()) -> list[dict]:
    """2 -> 4; worker-0's push 1 at shard 0 carried bucket B (moving 0 -> 2); B's final count per shard
    as `reports` says."""
    b = _bucket_between(0, 2)
    h = [ev(0, "run-start", {}),
         ev(1.0, "migration-start", {"migration": "m", "src": [0, 1], "dst": [0, 1, 2, 3], "routing_epoch": 0}),
         ev(3.0, "migration-switch", {"migration": "m", "routing_epoch": 1, "shards": [0, 1, 2, 3]}),
         acked_at(0.5, 0, 1, 0, ["__audit__/0", b, *keys_extra])]
    for s in (0, 1, 2, 3):
        f = final(f"shard-{s}/0", s, "primary", 1, 1, {"worker-0#1": [[1, 1]]} if s == 0 else {})
        f["value"]["buckets"] = {b: {"worker-0": reports[s]}} if s in reports else {}
        h.append(f)
    return h


def test_a_bucket_is_read_from_its_final_owner_only_and_an_unreported_one_is_unknown():
    assert no_lost_acks(_moved_run({2: 1}), {}).valid is True
    assert no_lost_acks(_moved_run({2: 1, 0: 0}), {}).valid is True       # a stale copy on the old owner
    assert no_lost_acks(_moved_run({2: 0, 0: 1}), {}).valid is False      # the owner's count is short
    v = no_lost_acks(_moved_run({0: 1}), {})                             # the owner reported nothing
    assert v.valid == "unknown" and "reported no count" in v.details["reason"]


def test_a_pair_that_moved_keys_without_a_bucket_is_unknown():
    from pschaos.psnodes.placement import owner
    k = next(f"p{i}" for i in range(500) if owner(f"p{i}", (0, 1)) == 1 and owner(f"p{i}", (0, 1, 2, 3)) == 3)
    h = _moved_run({2: 1}, keys_extra=[k])          # key k moved 1 -> 3, and no acked push carried a 1 -> 3 bucket
    v = no_lost_acks(h, {})
    assert v.valid == "unknown" and v.details["pairs_uncovered"] == [["m", 1, 3]]


def test_a_push_applied_at_the_source_and_again_at_the_new_owner_fails_exactly_once():
    """Issue 32, item 11: a hand-off without the dedup state lets a retry re-routed to the new owner
    apply again what the source applied before the fence: the moved bucket counts 2 for the one
    push worker-0 invoked. On the old code exactly-once judged the buckets for shortfall only."""
    from pschaos.harness.checkers.acks import exactly_once
    from pschaos.harness.checkers.migration import bucket_excess

    b = _bucket_between(0, 2)
    retry = ev(3.5, "push", {"worker": "worker-0", "incarnation": 1, "req_id": 1, "shard": 2, "origin": 0,
                             "part": [2], "keys": ["__audit__/2", b]}, "invoke", "worker-0", "w0:9")
    twice = _moved_run({2: 2}) + [retry]
    over, figures = bucket_excess(twice)
    assert over == [{"bucket": b, "worker": "worker-0", "count": 2, "invoked": 1}] and figures
    v = exactly_once(twice, {})
    assert v.valid is False and v.details["bucket_over_invoked"] == over
    assert bucket_excess(_moved_run({2: 1}) + [retry])[0] == []         # the retry answered as a duplicate


def test_a_bucket_whose_final_owner_reported_no_count_leaves_exactly_once_unjudged_not_passed():
    """Only buckets with a final count were judged for excess; one without was skipped, so a
    doubled push in it passed (review of issue 32, finding 8)."""
    from pschaos.harness.checkers.acks import exactly_once
    from pschaos.harness.checkers.migration import bucket_excess

    b, b2 = _bucket_between(0, 2), _bucket_between(0, 3)

    def sent(*buckets):
        return ev(0.4, "push", {"worker": "worker-0", "incarnation": 1, "req_id": 1, "shard": 0, "origin": 0,
                                "part": [0], "keys": ["__audit__/0", *buckets]}, "invoke", "worker-0", "w0:1")
    silent = _moved_run({2: 1}) + [sent(b, b2)]          # b2's owner (shard 3) reported no count for it
    over, figures = bucket_excess(silent)
    assert over == [] and b2 in figures.get("excess_unjudged", "") and b not in figures["excess_unjudged"]
    assert exactly_once(silent, {}).valid == "unknown"
    assert "excess_unjudged" not in bucket_excess(_moved_run({2: 1}) + [sent(b)])[1]
