"""`start()` returns once every copy it started answers, not only once each shard has a primary.

A shard has a primary as soon as its first copy wins the bootstrap; on a loaded host the last
replica's process may not have reached its listen by then. make test (stop 23's CI) saw
`be.status(replica)` refused right after the start in test_frozen_peer_channels; on the old code,
with six busy loops beside it, 5 starts of 8 left shard-0/2 refusing its first Status."""
from __future__ import annotations


def test_every_copy_answers_at_once_after_the_start(make_cluster):
    be = make_cluster(shards=2, copies=3, replication="sync")
    silent = [n for s in range(2) for n in be.cfg.shard_nodes(s) if be.status(n, timeout=0.5) is None]
    assert not silent, f"copies that did not answer right after start(): {silent}"
