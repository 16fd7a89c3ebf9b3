"""pschaos.psnodes.core.promotion: who is promoted, who restores and from what."""
from pschaos.psnodes.core.promotion import (Election, Orphan, Position, eligible, elect, isr_copy_alive, orphan_phase,
                                    rank, restore_from_checkpoint, restorer)

A, B, C = "shard-0/0", "shard-0/1", "shard-0/2"
ISR = [A, B, C]


def test_rank_prefers_epoch_of_last_entry_then_seq_then_low_slot():
    assert rank(B, Position(3, 5)) > rank(A, Position(2, 9))
    assert rank(A, Position(3, 5)) > rank(B, Position(3, 5))


def test_eligible_only_in_sync_isr_members():
    assert eligible(B, ISR, True)
    assert not eligible(B, ISR, False) and not eligible("shard-0/3", ISR, True)


def test_the_most_up_to_date_candidate_wins_and_the_isr_is_its_equals():
    posted = {C: Position(2, 9), B: Position(2, 9)}
    assert elect(B, Position(2, 9), posted, ISR, A) == Election(B, [B, C])
    assert elect(C, Position(2, 9), posted, ISR, A).winner == B


def test_old_primary_and_non_isr_posts_are_ignored():
    posted = {A: Position(9, 99), "shard-0/3": Position(9, 99), C: Position(2, 8)}
    assert elect(B, Position(2, 9), posted, ISR, A) == Election(B, [B])


def test_a_candidate_that_lost_the_window_is_still_counted_as_itself():
    # our own post expired (or never landed): we stand on what we hold, and lose to a newer one
    assert elect(B, Position(2, 7), {C: Position(2, 8)}, ISR, A).winner == C


def test_restore_waits_while_an_isr_copy_is_alive_and_in_sync():
    assert isr_copy_alive(C, ISR, {A: {"role": "replica", "in_sync": True}})
    assert isr_copy_alive(C, ISR, {A: {"role": "primary", "in_sync": False}})
    assert not isr_copy_alive(C, ISR, {A: {"role": "replica", "in_sync": False}})   # restarted from disk
    assert not isr_copy_alive(C, ISR, {C: {"role": "primary"}})                     # ourselves


def test_orphan_wait_is_a_lease_ttl_plus_a_suspect_period():
    assert orphan_phase(None, 5.0, 2.0, 1.0) is Orphan.START
    assert orphan_phase(5.0, 7.9, 2.0, 1.0) is Orphan.WAIT
    assert orphan_phase(5.0, 8.0, 2.0, 1.0) is Orphan.DECIDE


def test_restorer_waits_for_every_live_copy_then_gives_up_waiting():
    live = ["shard-0/3", "shard-0/4"]
    assert restorer("shard-0/3", Position(1, 5), {}, live, 3.0, 2.0, 1.0) is None
    assert restorer("shard-0/3", Position(1, 5), {}, live, 6.0, 2.0, 1.0) == "shard-0/3"
    posted = {"shard-0/4": Position(1, 6), "shard-0/9": Position(9, 9)}     # shard-0/9 is not live
    assert restorer("shard-0/3", Position(1, 5), posted, live, 3.0, 2.0, 1.0) == "shard-0/4"


def test_restore_from_the_checkpoint_only_when_it_is_newer():
    assert restore_from_checkpoint(Position(2, 5), Position(3, 1))
    assert not restore_from_checkpoint(Position(2, 5), Position(2, 5))
    assert not restore_from_checkpoint(Position(2, 5), None)
    assert Position.of({"seq": 4, "seq_epoch": 2}) == Position(2, 4)


def test_the_candidate_window_closes_once_every_isr_copy_that_may_stand_posted():
    from pschaos.psnodes.core.promotion import all_posted
    isr = ["shard-0/0", "shard-0/1", "shard-0/2"]
    assert all_posted("shard-0/1", ["shard-0/2"], isr, "shard-0/0")           # the old primary never posts
    assert all_posted("shard-0/1", [], ["shard-0/0", "shard-0/1"], "shard-0/0")  # alone in the ISR
    assert not all_posted("shard-0/1", [], isr, "shard-0/0")                 # shard-0/2 may still post
    assert not all_posted("shard-0/1", ["shard-0/1"], isr, "shard-0/0")
