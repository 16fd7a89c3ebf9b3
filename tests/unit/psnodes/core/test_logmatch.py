"""pschaos.psnodes.core.logmatch: positions, prefixes and what a peer is sent."""
from pschaos.psnodes.core import logmatch
from pschaos.psnodes.core.logmatch import (LOG_CATCHUP_MAX, SyncKind, catchup_kind, caught_up, choose_sync, epoch_of,
                                   matches)

EPOCHS = [[1, 1], [3, 3]]          # seqs 1-2 of epoch 1, seq 3 on of epoch 3


def test_epoch_of_follows_the_epoch_history():
    assert [epoch_of(EPOCHS, s) for s in (0, 1, 2, 3, 9)] == [0, 1, 1, 3, 3]
    assert epoch_of([], 5) == 0


def test_matches_needs_same_seq_and_epoch():
    assert matches(EPOCHS, 4, 0, 0)                 # the empty history is everyone's prefix
    assert matches(EPOCHS, 4, 2, 1)
    assert not matches(EPOCHS, 4, 3, 2)             # same seq, last entry of another epoch
    assert not matches(EPOCHS, 4, 5, 3)             # ahead of us
    assert matches(EPOCHS, 4, 4, 3)


def test_unknown_peer_or_equal_history_gets_a_heartbeat():
    assert choose_sync(None, False, 10, 0) is SyncKind.HEARTBEAT
    assert choose_sync(10, True, 10, 0) is SyncKind.HEARTBEAT


def test_diverged_peer_gets_a_snapshot_even_at_equal_seq():
    assert choose_sync(10, False, 10, 0) is SyncKind.SNAPSHOT     # last entry differs at equal seq
    assert choose_sync(3, False, 10, 0) is SyncKind.SNAPSHOT


def test_log_while_close_and_the_log_reaches_back():
    assert choose_sync(100 - LOG_CATCHUP_MAX, True, 100, 0) is SyncKind.LOG
    assert choose_sync(5, True, 10, 5) is SyncKind.LOG             # the log starts right after it


def test_delta_when_far_behind_or_the_log_was_trimmed():
    assert choose_sync(100 - LOG_CATCHUP_MAX - 1, True, 100, 0) is SyncKind.DELTA
    assert choose_sync(4, True, 10, 5) is SyncKind.DELTA


def test_caught_up_needs_the_same_history():
    assert caught_up(7, True, 7)
    assert not caught_up(7, False, 7) and not caught_up(6, True, 7)
    assert SyncKind.DELTA.value == "delta"


def test_a_catchup_is_named_by_its_costliest_call():
    assert catchup_kind(["log", "snapshot", "delta"]) is SyncKind.SNAPSHOT
    assert catchup_kind(["log", "delta"]) is SyncKind.DELTA
    assert catchup_kind(["log"]) is SyncKind.LOG and catchup_kind([]) is SyncKind.LOG


def test_a_sender_sends_at_once_while_the_peer_lacks_entries_or_is_unknown():
    assert logmatch.idle_wait(None, 5, last_sent=10.0, now=10.0, heartbeat_s=0.05) == 0
    assert logmatch.idle_wait(4, 5, last_sent=10.0, now=10.0, heartbeat_s=0.05) == 0


def test_an_idle_sender_waits_out_its_heartbeat_period_whatever_wakes_it():
    # woken 10 ms after its last call (a sibling's reply notified the condition): 40 ms to go
    assert abs(logmatch.idle_wait(5, 5, last_sent=10.0, now=10.01, heartbeat_s=0.05) - 0.04) < 1e-9
    assert logmatch.idle_wait(5, 5, last_sent=10.0, now=10.06, heartbeat_s=0.05) == 0
    assert logmatch.idle_wait(5, 5, last_sent=float("-inf"), now=0.0, heartbeat_s=0.05) == 0
