"""The elector credits its own stall once per silence (M4 of the detector review).

`Elector.paused` used to move a replica's `last_heard` to now on every wake-up more than 100 ms
late; on an overloaded host, late on every wake-up, the silence never grew and a dead primary was
never replaced. Now it moves `last_heard` forward by the lateness, once per silence
(pschaos.psnodes.core.detector.after_local_pause), and still says so in a `local-pause` event.
"""
from __future__ import annotations

import threading
from types import SimpleNamespace

from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.replication.election import Elector


class _Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def emit(self, kind: str, fields: dict) -> None:
        self.seen.append((kind, fields))


def _replica(role: str = "replica") -> SimpleNamespace:
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1, copies=2, workers=1)
    return SimpleNamespace(cfg=cfg, shard=0, epoch=1, role=role, last_heard=100.0, cond=threading.Condition(),
                           detector=cfg.failure_detector(), events=_Events(), links={})


def test_an_overloaded_replica_still_suspects_a_dead_primary():
    node = _replica()
    elector = Elector(node)
    now = 100.0
    for _ in range(10):                 # 2 s of wake-ups, each 150 ms later than the 50 ms asked
        now += 0.2
        elector.paused(now, 0.15)
    assert node.last_heard == 100.15    # one credit of the lateness, not `now`
    assert node.detector.suspects(now, node.last_heard)
    pauses = [f for kind, f in node.events.seen if kind == "local-pause"]
    assert len(pauses) == 10 and pauses[0]["credited_ms"] == 150.0
    assert all(p["credited_ms"] == 0.0 and p["late_ms"] == 150.0 for p in pauses[1:])


def test_a_new_silence_is_credited_again():
    node = _replica()
    elector = Elector(node)
    elector.paused(100.3, 0.15)
    node.last_heard = 101.0             # the primary was heard
    elector.paused(101.3, 0.15)
    assert node.last_heard == 101.15


def test_a_primary_is_not_moved_but_says_it_stood_still():
    """A primary's stall moves nothing, and is on record: the evidence no-spurious-failovers reads
    when a replica replaced it in the meantime (pschaos.harness.checkers.spurious)."""
    node = _replica("primary")
    Elector(node).paused(100.3, 0.15)
    assert node.last_heard == 100.0
    ((kind, fields),) = node.events.seen
    assert kind == "local-pause" and fields["role"] == "primary" and fields["epoch"] == 1
    assert fields["late_ms"] == 150.0 and fields["credited_ms"] == 0.0 and fields["cpu_ms"] is None
    assert fields["woke_ms"] >= 0.0
