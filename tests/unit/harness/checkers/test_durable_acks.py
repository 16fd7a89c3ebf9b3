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


def final(t, node, epoch, seq, role="replica", shard=0, f="final-state"):
    return ev(t, f, {"node": node, "shard": shard, "alive": True, "role": role, "epoch": epoch, "seq": seq},
              node=node)


QUIESCE = ev(9.0, "quiesce", {"settled": True, "timeout_s": 20.0})


def test_every_answer_is_judged_or_the_check_is_unknown():
    """Review of issue 32, finding 5: one judged ack passed the run. An ack of the last epoch that
    no reading followed (the sampler's last look came within its slack) is now named, and the
    check is unknown; the final observation after the run came to rest judges it."""
    judged = ok(2.0, "worker-0", 7, 0, 1, 9)
    late = ok(8.9, "worker-0", 8, 0, 1, 10)
    h = BASE + [judged, sample(2.6, "shard-0/1", 1, 9), late, sample(8.95, "shard-0/1", 1, 10)]
    v = CHECKERS["acks-durable"](h, SYNC)
    assert v.valid == "unknown" and v.details["unjudged_count"] == 1 and v.details["unjudged"][0]["req_id"] == 8
    ends = [QUIESCE, final(9.1, "shard-0/1", 1, 10), final(9.1, "shard-0/2", 1, 10)]
    assert CHECKERS["acks-durable"](h + ends, SYNC).valid is True


def test_the_final_observation_sees_an_ack_the_isr_never_held():
    """A replica still in the ISR at the end that holds less than an ack of its epoch: the old
    check never read the final states and passed this run on the one sample it had."""
    h = BASE + [ok(2.0, "worker-0", 7, 0, 1, 9), sample(2.6, "shard-0/1", 1, 9), sample(2.6, "shard-0/2", 1, 9),
                ok(8.9, "worker-0", 8, 0, 1, 10), QUIESCE, final(9.1, "shard-0/1", 1, 10),
                final(9.1, "shard-0/2", 1, 9)]
    v = CHECKERS["acks-durable"](h, SYNC)
    assert v.valid is False and v.details["not_on_isr"][0] == {
        "worker": "worker-0", "req_id": 8, "shard": 0, "epoch": 1, "seq": 10, "t": 8.9, "replica": "shard-0/2",
        "replica_seq": 9, "sampled_t": 9.1, "read_by": "final"}
    # a final reading taken before the run came to rest (no quiesce) is no evidence for the late ack
    assert CHECKERS["acks-durable"]([e for e in h if e is not QUIESCE], SYNC).valid == "unknown"


def test_a_retired_group_is_judged_by_its_reading_after_the_fence():
    """A scale-in retires a shard group: the harness reads each of its copies after fencing it,
    and every answer the group gave was sent before that fence."""
    acked = ok(5.6, "worker-0", 7, 0, 1, 9)
    fenced = ev(5.7, "migrate-fenced", {"shard": 0, "migration": "m", "seq": 9, "epoch": 1}, node="shard-0/0")
    h = BASE + [acked, fenced, final(5.75, "shard-0/1", 1, 9, f="retired-state"),
                final(5.75, "shard-0/2", 1, 9, f="retired-state")]
    assert CHECKERS["acks-durable"](h, SYNC).valid is True
    h[-1] = final(5.75, "shard-0/2", 1, 8, f="retired-state")
    assert CHECKERS["acks-durable"](h, SYNC).valid is False
    assert CHECKERS["acks-durable"]([e for e in h if e is not fenced], SYNC).valid == "unknown"


def test_an_isr_killed_before_any_reading_is_named_and_never_the_only_evidence():
    """all-copies-lost: every copy of the shard is killed 0.2 s after the last acks; nothing can
    read them. They are counted apart (losses-accounted judges what the restore declares), and a
    run whose every ack went that way is unknown."""
    kill = ev(2.2, "fault-start", {"kind": "kill", "target": "shard-0/1", "victims": ["shard-0/0", "shard-0/1",
                                                                                        "shard-0/2"]})
    early, late = ok(1.0, "worker-0", 6, 0, 1, 8), ok(2.0, "worker-0", 7, 0, 1, 9)
    v = CHECKERS["acks-durable"](BASE + [early, sample(1.5, "shard-0/1", 1, 8), late, kill], SYNC)
    assert v.valid is True and v.details["isr_went_down_first"] == 1
    assert CHECKERS["acks-durable"](BASE + [late, kill], SYNC).valid == "unknown"
    # copies down at the send and not back are gone too; one that came back before it is readable
    before = dict(kill, t=1.8)
    assert CHECKERS["acks-durable"](BASE + [early, sample(1.5, "shard-0/1", 1, 8), before, late], SYNC).valid is True
    back = [ev(1.9, "start", {"shard": 0, "seq": 8, "role": "replica", "epoch": 1}, node=n)
            for n in ("shard-0/1", "shard-0/2")]
    assert CHECKERS["acks-durable"](BASE + [early, sample(1.5, "shard-0/1", 1, 8), before, *back, late],
                                    SYNC).valid == "unknown"
    # a kill long after the ack is no excuse: the sampler owed a reading before it
    later = dict(kill, t=5.0)
    assert CHECKERS["acks-durable"](BASE + [early, sample(1.5, "shard-0/1", 1, 8), late, later], SYNC).valid \
        == "unknown"
