"""The elector probes once a silence it first looks at past suspect_s (psnodes.core.detector.may_probe).

On a loaded machine (load 70) a replica's own late wake-up plus an etcd read carried the silence
from under suspect_s to over it before it looked; `may_probe` then said no and the replica
replaced a live primary unasked (kill-primary seed 2: stood at 300.7 ms of silence while the
other replica's probe at 296 ms was answered). Now the first look of a silence probes; a second
one past the ceiling stands (a one-way cut stays bounded).
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from psnodes.config import ClusterConfig, ShardRecord
from psnodes.election import Elector


class _Events:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def emit(self, kind: str, fields: dict) -> None:
        self.seen.append(kind)


class _Probe:
    """The primary answers as primary of the epoch asked."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    def clears(self, primary: str, epoch: int, timeout: float) -> bool:
        self.asked.append(timeout)
        return True


def test_a_silence_first_seen_past_suspect_s_is_probed_once_then_stands():
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1, copies=3, workers=1)
    node = SimpleNamespace(cfg=cfg, shard=0, role="replica", cond=threading.Condition(), events=_Events(),
                           links={}, last_heard=time.monotonic() - cfg.suspect_s - 0.01)
    elector = Elector(node)
    elector.probe = _Probe()
    rec = ShardRecord(epoch=1, primary="shard-0/0", isr=["shard-0/0", "shard-0/1", "shard-0/2"])
    assert elector.held_back(rec)                    # asked, answered: held back a heartbeat
    assert elector.probe.asked == [cfg.probe_s] and node.events.seen == ["probe-held"]
    assert not elector.held_back(rec)                # the same silence, past the ceiling: it stands
    assert len(elector.probe.asked) == 1
    node.last_heard = time.monotonic() - cfg.suspect_s - 0.01     # heard, then silent again: a new silence
    assert elector.held_back(rec) and len(elector.probe.asked) == 2
