"""pschaos.psnodes.core.ack: the ack rule of each mode and the follower lease."""
from pschaos.psnodes.core.ack import Replicas, followers_fresh, lagging, replicated, silent, within_lag

ISR = ["shard-0/0", "shard-0/1", "shard-0/2"]


def sync(peer_seq, isr=ISR, min_isr=2):
    return Replicas("shard-0/0", isr, peer_seq, "sync", min_isr)


def test_sync_acks_once_every_isr_member_applied():
    r = sync({"shard-0/0": 5, "shard-0/1": 5, "shard-0/2": 4})
    assert replicated(r, 4) and not replicated(r, 5)
    assert lagging(r, 5) == ["shard-0/2"]


def test_sync_refuses_below_min_isr_even_when_alone_and_applied():
    assert not replicated(sync({"shard-0/0": 5}, isr=["shard-0/0"], min_isr=2), 1)
    assert replicated(sync({"shard-0/0": 5}, isr=["shard-0/0"], min_isr=1), 5)


def test_an_unheard_peer_counts_as_seq_zero():
    assert replicated(sync({}), 0) and not replicated(sync({}), 1)


def test_async_ignores_min_isr_and_bounds_lag():
    r = Replicas("shard-0/0", ["shard-0/0", "shard-0/1"], {"shard-0/1": 10}, "async", 3)
    assert within_lag(r, 10 + 4, 4)         # a lag of exactly max_lag is allowed
    assert not within_lag(r, 10 + 5, 4)     # max_lag + 1 waits


def test_follower_lease_is_strictly_newer_than_the_bound():
    heard = {"shard-0/1": 10.0, "shard-0/2": 10.5}
    # bound = now - (suspect 1.0 - margin 0.2) = now - 0.8
    assert followers_fresh("shard-0/0", ISR, heard, 10.79, 1.0, 0.2)
    assert not followers_fresh("shard-0/0", ISR, heard, 10.8, 1.0, 0.2)
    assert not followers_fresh("shard-0/0", ISR, {"shard-0/1": 10.0}, 10.1, 1.0, 0.2)   # one never heard
    assert followers_fresh("shard-0/0", ["shard-0/0"], {}, 99.0, 1.0, 0.2)               # alone
    assert silent("shard-0/0", ISR, {"shard-0/1": 1.0}) == ["shard-0/2"]
