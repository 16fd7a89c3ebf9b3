"""pschaos.psnodes.core.isr: shrink, re-add and what etcd holds."""
from pschaos.psnodes.core.isr import (DROP_MARGIN_S, IsrChange, add_is_stale, change, drop_due, probe_hold, probe_wait,
                              should_drop, should_readd)

A, B, C = "shard-0/0", "shard-0/1", "shard-0/2"


def test_remove_and_add():
    assert change([A, B, C], remove=B) == IsrChange([A, C])
    assert change([A, C], add=B) == IsrChange([A, C, B])
    assert change([A, B], add=B).unchanged([A, B])


def test_sync_refuses_a_shrink_below_min_isr_async_does_not():
    assert change([A, B], remove=B, mode="sync", min_isr=2) == IsrChange([A, B], refused=True)
    assert change([A, B], remove=B, mode="async", min_isr=2) == IsrChange([A])
    assert not change([A, B], remove=B, mode="sync", min_isr=2).unchanged([A, B])


def test_drop_after_suspect_s_of_silence_and_backoff():
    assert should_drop(10.0, 8.9, 1.0, True, 0.0)
    assert not should_drop(10.0, 9.0, 1.0, True, 0.0)       # exactly suspect_s: not yet
    assert not should_drop(10.0, 5.0, 1.0, False, 0.0)      # already out
    assert not should_drop(10.0, 5.0, 1.0, True, 10.5)      # retry later


def test_a_call_in_flight_looks_again_just_past_suspect_s():
    at = drop_due(8.9, 1.0, 0.0)
    assert at == 8.9 + 1.0 + DROP_MARGIN_S
    assert should_drop(at, 8.9, 1.0, True, 0.0)             # a look then may drop the peer
    assert drop_due(8.9, 1.0, 12.0) == 12.0                 # not before a retry or a probe's hold
    assert probe_wait(0.25, 0.3) == 0.3 and probe_wait(0.5, 0.3) == 0.5
    assert probe_wait(0.25, 0.3, 0.31) == 0.62              # a link whose round trip alone passes suspect_s
    assert probe_hold(0.25, 0.05) == 0.25 and probe_hold(0.0, 0.05) == 0.05   # probe_s 0: no probe storm


def test_readd_only_caught_up_peers_out_of_the_isr():
    assert should_readd(True, False)
    assert not should_readd(True, True) and not should_readd(False, False)
    assert add_is_stale(False, True) and add_is_stale(True, False) and not add_is_stale(True, True)
