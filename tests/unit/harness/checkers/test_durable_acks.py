"""acks-durable (issue 32, item 10): in sync mode every ack, a retry's answered from the dedup
table included, is held against what the in-sync replicas held: the next epoch's promotion seq
and the replicas' sampled seqs. A planted early retry ack (tests/zoo: early-retry-ack) failed it
on cut-primary-retries on both backends; no check of the old code looked."""
from __future__ import annotations

from pschaos.harness.checkers import CHECKERS

from tests.unit.histories import ev, ok

SYNC = {"replication": "sync"}


def promote(t, epoch, node, seq, isr, shard=0):
    return ev(t, "promote", {"shard": shard, "epoch": epoch, "node": node, "seq": seq, "isr": isr}, node=node)


def sample(t, node, epoch, seq, role="replica", shard=0):
    return ev(t, "sample", {"tick": 1, "node": node, "shard": shard, "role": role, "epoch": epoch, "seq": seq},
              node=node)


BASE = [promote(0.1, 1, "shard-0/0", 0, ["shard-0/0", "shard-0/1", "shard-0/2"])]


def test_an_ack_the_next_primary_did_not_hold_fails():
    early = ok(2.0, "worker-0", 7, 0, 1, 9, dup=True)
    h = BASE + [early, promote(5.0, 2, "shard-0/1", 8, ["shard-0/1"])]
    v = CHECKERS["acks-durable"](h, SYNC)
    assert v.valid is False and v.details["ahead_of_next_promotion"][0]["promoted_at_seq"] == 8
    assert CHECKERS["acks-durable"](BASE + [early, promote(5.0, 2, "shard-0/1", 9, ["shard-0/1"])], SYNC).valid is True


def test_an_ack_a_replica_still_in_the_isr_did_not_hold_fails_without_any_failover():
    acked = ok(2.0, "worker-0", 7, 0, 1, 9)
    lagging = sample(2.6, "shard-0/2", 1, 8)
    v = CHECKERS["acks-durable"](BASE + [acked, lagging], SYNC)
    assert v.valid is False and v.details["not_on_isr"][0]["replica"] == "shard-0/2"
    # a sample answered around the ack, a replica dropped from the ISR before the sample, or one
    # restarted since (it catches up again from its checkpoint), is no evidence against it
    assert CHECKERS["acks-durable"](BASE + [acked, sample(2.1, "shard-0/2", 1, 8),
                                            sample(2.6, "shard-0/1", 1, 9)], SYNC).valid is True
    dropped = ev(2.3, "isr", {"shard": 0, "epoch": 1, "isr": ["shard-0/0", "shard-0/1"], "removed": "shard-0/2"})
    assert CHECKERS["acks-durable"](BASE + [acked, dropped, lagging, sample(2.6, "shard-0/1", 1, 9)],
                                    SYNC).valid is True
    first = ev(0.2, "start", {"shard": 0, "seq": 0, "role": "replica", "epoch": 1}, node="shard-0/2")
    restarted = ev(2.4, "start", {"shard": 0, "seq": 3, "role": "replica", "epoch": 1}, node="shard-0/2")
    assert CHECKERS["acks-durable"](BASE + [first, acked, restarted, lagging, sample(2.6, "shard-0/1", 1, 9)],
                                    SYNC).valid is True
    # a node's first start, recorded once its start call returned (after the first answers), is
    # no restart: its sample still counts
    late_first = dict(first, t=2.4)
    assert CHECKERS["acks-durable"](BASE + [acked, late_first, lagging, sample(2.6, "shard-0/1", 1, 9)],
                                    SYNC).valid is False


def test_a_restore_epoch_is_left_to_losses_accounted_and_async_or_no_evidence_is_unknown():
    acked = ok(2.0, "worker-0", 7, 0, 1, 9)
    restore = ev(5.0, "restore", {"shard": 0, "epoch": 2, "restored_seq": 3})
    assert CHECKERS["acks-durable"](BASE + [acked, restore, promote(5.0, 2, "shard-0/1", 3, ["shard-0/1"])],
                                    SYNC).valid == "unknown"
    assert CHECKERS["acks-durable"](BASE + [acked], SYNC).valid == "unknown"
    assert CHECKERS["acks-durable"](BASE + [acked, sample(2.6, "shard-0/1", 1, 9)],
                                    {"replication": "async"}).valid == "unknown"


def test_a_pull_past_what_the_next_primary_held_is_a_dirty_read():
    """reads-committed (item 4): a primary that answers a pull with an entry its replicas do not
    hold yet (tests/zoo: no-read-barrier) is seen by the next promotion's seq, or by a replica still
    in the ISR that reports less after the read."""
    from tests.unit.histories import pull

    read = pull(1.9, 2.0, "worker-1", 0, 0, 1, 9, ["w"], "p1")
    v = CHECKERS["reads-committed"](BASE + read + [promote(5.0, 2, "shard-0/1", 8, ["shard-0/1"])], SYNC)
    assert v.valid is False and v.details["ahead_of_next_promotion"][0]["op"] == "p1"
    assert CHECKERS["reads-committed"](BASE + read + [sample(2.6, "shard-0/2", 1, 8)], SYNC).valid is False
    assert CHECKERS["reads-committed"](BASE + read + [sample(2.6, "shard-0/2", 1, 9)], SYNC).valid is True
    assert CHECKERS["reads-committed"](BASE + read, {"replication": "async"}).valid == "unknown"


def test_a_read_served_past_its_own_isr_watermark_fails_without_any_failover_or_sample():
    """reads-committed (item 4): the reply names the ISR watermark it was served at
    (PullReply.committed). With the read barrier planted away (tests/zoo: no-read-barrier),
    kill-primary on the twin read past it 364 times in 1200 pulls; the old evidence (the next
    promotion, the samples) saw none of them and the mutant survived."""
    from tests.unit.histories import pull

    read = pull(1.9, 2.0, "worker-1", 0, 0, 1, 9, ["w"], "p1")
    read[-1]["value"]["committed"] = 8
    v = CHECKERS["reads-committed"](BASE + read, SYNC)
    assert v.valid is False and v.details["past_watermark"][0]["committed"] == 8
    read[-1]["value"]["committed"] = 9
    v = CHECKERS["reads-committed"](BASE + read, SYNC)       # the node's own account alone passes nothing
    assert v.valid == "unknown" and v.details["judged_by_watermark"] == 1
    v = CHECKERS["reads-committed"](BASE + read + [sample(2.6, "shard-0/2", 1, 9)], SYNC)
    assert v.valid is True


def test_a_row_read_is_held_to_the_isr_promise_and_to_monotone_reads_as_a_dense_one():
    """Row pulls (embedding tables) recorded no event, so a dirty row read passed every check;
    now each is a `pull-rows` the read checks judge as a dense pull."""
    rows = ev(2.0, "pull-rows", {"worker": "worker-1", "shard": 0, "table": "emb", "rows": 4, "epoch": 1,
                                 "seq": 9, "node": "shard-0/0", "committed": 9}, node="worker-1")
    rows["type"], rows["op_id"] = "ok", "r1"
    nxt = promote(5.0, 2, "shard-0/1", 8, ["shard-0/1"])
    v = CHECKERS["reads-committed"](BASE + [rows, nxt], SYNC)
    assert v.valid is False and v.details["ahead_of_next_promotion"][0]["op"] == "r1"
    past = dict(rows, value={**rows["value"], "committed": 8})
    assert CHECKERS["reads-committed"](BASE + [past, sample(2.6, "shard-0/2", 1, 9)], SYNC).valid is False
    assert CHECKERS["reads-committed"](BASE + [rows, sample(2.6, "shard-0/2", 1, 9)], SYNC).valid is True
    from tests.unit.histories import pull

    dense = pull(1.0, 1.1, "worker-1", 0, 0, 1, 3, ["w"], "p1")
    m = CHECKERS["monotone-reads"](BASE + dense + [rows, nxt], SYNC)
    assert m.valid is False and m.details["undone_reads"][0]["seq"] == 9


def restore(t, epoch, shard=0):
    return ev(t, "restore", {"shard": shard, "epoch": epoch, "restored_seq": 3})


def test_every_answer_is_judged_or_the_check_is_unknown():
    """Review of issue 32, finding 5: one judged ack passed the run. Here the second ack's epoch
    ends with a restore (no promotion judges it) and its replicas are read again only at the new
    epoch: nothing judged it, the old check passed the run on the first ack's sample."""
    judged = ok(2.0, "worker-0", 7, 0, 1, 9)
    h = BASE + [judged, sample(2.6, "shard-0/1", 1, 9), sample(2.6, "shard-0/2", 1, 9),
                ok(3.0, "worker-0", 8, 0, 1, 10), restore(3.5, 2), promote(3.5, 2, "shard-0/1", 3, ["shard-0/1"]),
                sample(4.0, "shard-0/1", 2, 5, role="primary"), sample(4.0, "shard-0/2", 2, 5)]
    v = CHECKERS["acks-durable"](h, SYNC)
    assert v.valid == "unknown" and v.details["unjudged_count"] == 1 and v.details["unjudged"][0]["req_id"] == 8


def test_the_runs_tail_is_counted_apart_but_a_sampler_that_stopped_early_is_no_excuse():
    """Acks after the sampler's last round (the workload's last steps) no sample can read; the
    final observation reads once replication settled and proves nothing of an early ack, so it
    is not used. A sampler that stopped long before the acks did leaves them unjudged."""
    first = ok(2.0, "worker-0", 7, 0, 1, 9)
    reads = [sample(2.6, "shard-0/1", 1, 9), sample(2.6, "shard-0/2", 1, 9)]
    last = ok(2.5, "worker-0", 8, 0, 1, 10)
    settled = ev(3.0, "final-state", {"node": "shard-0/2", "shard": 0, "alive": True, "role": "replica", "epoch": 1,
                                      "seq": 10}, node="shard-0/2")
    v = CHECKERS["acks-durable"](BASE + [first, last, *reads, settled], SYNC)
    assert v.valid is True and v.details["after_the_last_sample"] == 1 and v.details["judged_by_replicas"] == 1
    late = ok(9.0, "worker-0", 9, 0, 1, 11)
    v = CHECKERS["acks-durable"](BASE + [first, *reads, late, settled], SYNC)
    assert v.valid == "unknown" and v.details["unjudged"][0]["req_id"] == 9


def test_a_replica_down_between_the_ack_and_its_sample_is_no_evidence_either_way():
    """A copy killed after the ack reads its checkpoint's seq once back: lower, but not a broken
    promise (the hostile review of this check, finding 4: its start event comes seconds later)."""
    acked = ok(2.0, "worker-0", 7, 0, 1, 9)
    kill = ev(2.3, "fault-start", {"kind": "kill", "target": "shard-0/2"})
    h = BASE + [acked, kill, sample(2.6, "shard-0/2", 1, 3), sample(2.6, "shard-0/1", 1, 9)]
    assert CHECKERS["acks-durable"](h, SYNC).valid is True


def test_an_isr_killed_before_the_next_sample_is_named_and_never_the_only_evidence():
    """all-copies-lost: every copy of the shard is killed 0.2 s after the last acks, before the
    sampler's next round; they come back at a new epoch. Those acks are counted apart
    (losses-accounted judges what the restore declares), and a run whose every ack went that way
    is unknown."""
    kill = ev(2.2, "fault-start", {"kind": "kill", "target": "shard-0/1", "victims": ["shard-0/0", "shard-0/1",
                                                                                        "shard-0/2"]})
    back = [restore(3.0, 2), promote(3.0, 2, "shard-0/0", 3, ["shard-0/0", "shard-0/1", "shard-0/2"]),
            sample(3.5, "shard-0/1", 2, 4), sample(3.5, "shard-0/2", 2, 4)]
    early, late = ok(1.0, "worker-0", 6, 0, 1, 8), ok(2.0, "worker-0", 7, 0, 1, 9)
    v = CHECKERS["acks-durable"](BASE + [early, sample(1.5, "shard-0/1", 1, 8), sample(1.5, "shard-0/2", 1, 8),
                                         late, kill, *back], SYNC)
    assert v.valid is True and v.details["isr_went_down_first"] == 1
    assert CHECKERS["acks-durable"](BASE + [late, kill, *back], SYNC).valid == "unknown"
    # copies down at the send (not long: the primary had not dropped them yet) are gone too; ones
    # that came back before it are readable, and owed a sample
    before = dict(kill, t=1.8)
    assert CHECKERS["acks-durable"](BASE + [early, sample(1.5, "shard-0/1", 1, 8), sample(1.5, "shard-0/2", 1, 8),
                                            before, late, *back], SYNC).valid is True
    up = [ev(1.9, "start", {"shard": 0, "seq": 8, "role": "replica", "epoch": 1}, node=n)
          for n in ("shard-0/1", "shard-0/2")]
    assert CHECKERS["acks-durable"](BASE + [early, sample(1.5, "shard-0/1", 1, 8), sample(1.5, "shard-0/2", 1, 8),
                                            before, *up, late, *back], SYNC).valid == "unknown"


def test_a_replica_dead_long_before_the_ack_is_no_excuse_however_early_the_push_was_sent():
    """The second review of this check: the window reached back from the push's first send, and a
    push retried for seconds covered a replica killed long before its ack; a sync primary cannot
    ack while a replica dead that long is still in its ISR. Now it counts back from the ack."""
    from tests.unit.histories import acked

    h = [promote(0.1, 1, "shard-0/0", 0, ["shard-0/0", "shard-0/1"]),
         *acked(10.0, 13.0, "worker-0", 7, 0, 1, 9),
         ev(10.2, "fault-start", {"kind": "kill", "target": "shard-0/1"}),
         ev(14.0, "start", {"shard": 0, "seq": 3, "role": "replica", "epoch": 1}, node="shard-0/1"),
         sample(15.0, "shard-0/1", 1, 9)]
    v = CHECKERS["acks-durable"](h, SYNC)
    assert v.valid == "unknown" and v.details["isr_went_down_first"] == 0, v.details


def test_a_replica_dropped_from_the_isr_since_still_shows_what_it_held():
    """split-brain-restore at seed 1 (final library run): acks in the 0.25 s before a cut, the
    replica's next sample came after the primary dropped it from the ISR, at a seq above them;
    the check was unknown on a correct run. A dropped replica that holds the entry held it; one
    that holds less may have been dropped for it, and is no evidence either way."""
    acked = ok(8.4, "worker-0", 7, 0, 1, 604)
    dropped = ev(9.1, "isr", {"shard": 0, "epoch": 1, "isr": ["shard-0/0"], "removed": "shard-0/1"})
    h = [promote(0.1, 1, "shard-0/0", 0, ["shard-0/0", "shard-0/1"]), acked, dropped]
    assert CHECKERS["acks-durable"](h + [sample(9.11, "shard-0/1", 1, 616)], SYNC).valid is True
    assert CHECKERS["acks-durable"](h + [sample(9.11, "shard-0/1", 1, 600)], SYNC).valid == "unknown"


def test_a_copy_back_in_the_isr_after_the_samplers_last_round_leaves_its_acks_in_the_tail():
    """migration-kill-source-primary, shortened (test_backend_determinism) on the 2026-12-07 19:29
    calibration: the killed copy started again and rejoined the ISR after the sampler's last
    round, and the acks in the run's last 0.2 s promised it too. It was never read after them, as
    no copy was: the run's tail, not unjudged (the old rule asked for that copy's own last read
    within TAIL_S, and it had none since before its kill). A round of the sampler after the acks
    that did not read it (it read only the primary) leaves them unjudged still."""
    isr = ev(1.76, "isr", {"shard": 0, "epoch": 1, "isr": ["shard-0/0", "shard-0/1", "shard-0/2"]},
             node="shard-0/0")
    dropped = ev(0.9, "isr", {"shard": 0, "epoch": 1, "isr": ["shard-0/0", "shard-0/1"]}, node="shard-0/0")
    judged = ok(1.2, "worker-0", 7, 0, 1, 9)
    h = BASE + [sample(0.5, "shard-0/2", 1, 3), ev(0.8, "fault-start", {"kind": "kill", "target": "shard-0/2"}),
                dropped, judged, sample(1.65, "shard-0/1", 1, 9), sample(1.65, "shard-0/0", 1, 9, role="primary"),
                ev(1.7, "start", {"shard": 0, "seq": 3, "role": "replica", "epoch": 1}, node="shard-0/2"),
                isr, ok(1.8, "worker-0", 8, 0, 1, 12)]
    v = CHECKERS["acks-durable"](h, SYNC)
    assert v.valid is True and v.details["after_the_last_sample"] == 1 and v.details["judged_by_replicas"] == 1, v.details
    again = h + [sample(2.1, "shard-0/0", 1, 12, role="primary")]     # a round that read neither replica
    v = CHECKERS["acks-durable"](again, SYNC)
    assert v.valid == "unknown" and v.details["unjudged"][0]["req_id"] == 8, v.details
    # a copy dead since long before the ack, never started again and still in the ISR (stale) is
    # no excuse in the tail either (the review of this change, finding 1)
    stale = [e for e in h if e.get("f") != "start"]
    v = CHECKERS["acks-durable"](stale, SYNC)
    assert v.valid == "unknown" and v.details["unjudged"][0]["req_id"] == 8, v.details
