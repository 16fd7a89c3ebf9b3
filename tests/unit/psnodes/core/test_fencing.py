"""pschaos.psnodes.core.fencing: epochs decide who a copy listens to."""
from pschaos.psnodes.core.fencing import (Entry, Replicate, deposed_by, follow_record, names_me, on_replicate, reached_sync,
                                  renews_follower_lease, serve_refusal, suspecting, take_entry)

P, Q = "shard-0/0", "shard-0/1"


def test_replicate_from_a_lower_epoch_is_refused():
    assert on_replicate(5, "replica", P, 4, P) is Replicate.REFUSE_STALE
    assert on_replicate(5, "primary", Q, 4, P) is Replicate.REFUSE_STALE


def test_a_higher_epoch_is_followed_even_by_a_primary():
    assert on_replicate(5, "primary", Q, 6, P) is Replicate.FOLLOW
    assert on_replicate(5, "replica", Q, 6, P) is Replicate.FOLLOW


def test_same_epoch():
    assert on_replicate(5, "replica", P, 5, P) is Replicate.ACCEPT
    assert on_replicate(5, "primary", Q, 5, P) is Replicate.REFUSE_PRIMARY
    assert on_replicate(5, "replica", "", 5, P) is Replicate.FOLLOW          # learned who leads
    assert on_replicate(5, "starting", "", 5, P) is Replicate.FOLLOW


def test_clients():
    assert serve_refusal("replica", 5, 5) == "not-primary"
    assert serve_refusal("primary", 5, 6) == "client-newer"
    assert serve_refusal("primary", 5, 4) == "" and serve_refusal("primary", 5, 5) == ""


def test_suspecting_flag_and_follower_lease():
    assert suspecting(5, 5) and not suspecting(0, 5) and not suspecting(4, 5)
    assert renews_follower_lease(5, 5, False)
    assert not renews_follower_lease(5, 5, True)       # a candidate renews nothing
    assert not renews_follower_lease(6, 5, False)


def test_entries_apply_in_order_once():
    assert [take_entry(4, s) for s in (3, 4, 5, 6)] == [Entry.SKIP, Entry.SKIP, Entry.APPLY, Entry.GAP]


def test_in_sync_needs_the_same_last_entry():
    assert not reached_sync(False, 7, 2, 7, 3)         # same seq, other epoch
    assert reached_sync(False, 7, 3, 7, 3)
    assert reached_sync(True, 1, 1, 7, 3)              # once in sync, stays so


def test_follow_a_newer_record_led_by_someone_else():
    assert follow_record(6, 5, Q, P)
    assert not follow_record(6, 5, P, P) and not follow_record(5, 5, Q, P)


def test_names_me_only_at_my_epoch():
    assert names_me(5, P, 5, P)
    assert not names_me(6, P, 5, P) and not names_me(5, Q, 5, P) and not names_me(None, None, 5, P)


def test_a_fenced_primary_follows_only_a_newer_record():
    assert deposed_by(6, 5)
    assert not deposed_by(5, 5) and not deposed_by(None, 5)


def test_replicate_refusal_words():
    from pschaos.psnodes.core.fencing import Replicate, replicate_refusal
    assert replicate_refusal(Replicate.ACCEPT, "shard-0/1", 2, 2, "shard-0/0") == ""
    assert replicate_refusal(Replicate.FOLLOW, "shard-0/1", 2, 3, "shard-0/0") == ""
    assert "refused: shard-0/1 is at epoch 3" in replicate_refusal(Replicate.REFUSE_STALE, "shard-0/1", 3, 2, "x")
    assert replicate_refusal(Replicate.REFUSE_PRIMARY, "shard-0/1", 2, 2, "x") == "shard-0/1 is itself primary at epoch 2"


def test_serve_refusal_words():
    from pschaos.psnodes.core.fencing import serve_refusal_words
    assert serve_refusal_words("shard-0/0", 0, "primary", 2, "shard-0/0", 2) == ""
    assert serve_refusal_words("shard-0/1", 0, "replica", 2, "shard-0/0", 2).endswith("; primary is shard-0/0")
    assert "client knows epoch 3" in serve_refusal_words("shard-0/0", 0, "primary", 2, "shard-0/0", 3)


def test_a_primary_doubts_its_epoch_once_an_isr_peer_was_silent_for_the_floor():
    from pschaos.psnodes.core.fencing import doubts_epoch
    isr = ["p", "a", "b"]
    assert not doubts_epoch("p", isr, {"a": 9.9, "b": 9.86}, now=10.0, floor_s=0.15)
    assert doubts_epoch("p", isr, {"a": 9.9, "b": 9.85}, now=10.0, floor_s=0.15)     # b: exactly the floor
    assert doubts_epoch("p", isr, {"a": 9.9}, now=10.0, floor_s=0.15)                # b never accepted a call
    assert not doubts_epoch("p", ["p"], {}, now=10.0, floor_s=0.15)                  # no peers: nothing to doubt


def test_a_bootstrap_starts_at_1_and_a_re_added_shard_above_every_epoch_of_its_old_life():
    from pschaos.psnodes.core.fencing import bootstrap_epoch
    assert bootstrap_epoch(0, 0) == 1                 # a new shard, an empty disk
    assert bootstrap_epoch(4, 0) == 5                 # the retired record reached epoch 4
    assert bootstrap_epoch(4, 6) == 7                 # this copy's disk holds entries of epoch 6
