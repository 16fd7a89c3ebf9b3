"""The elector probes once a silence it first looks at past suspect_s (pschaos.psnodes.core.detector.may_probe).

On a loaded machine (load 70) a replica's own late wake-up plus an etcd read carried the silence
from under suspect_s to over it before it looked; `may_probe` then said no and the replica
replaced a live primary unasked (kill-primary seed 2: stood at 300.7 ms of silence while the
other replica's probe at 296 ms was answered). Now the first look of a silence probes. A primary
that answered is asked again at every look (a lossy link stalls its stream past suspect_s:
loss-5-primary-replica), until probe_hold_s of silence, when the replica stands (a one-way cut
stays bounded); a probe that goes unanswered lets it stand at once.
"""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.replication.election import Elector


class _Events:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def emit(self, kind: str, fields: dict) -> None:
        self.seen.append(kind)


class _Probe:
    """The primary answers as primary of the epoch asked (or, `answers` False, not at all)."""

    def __init__(self, answers: bool = True) -> None:
        self.asked: list[float] = []
        self.answers = answers

    def clears(self, primary: str, epoch: int, timeout: float) -> bool:
        self.asked.append(timeout)
        return self.answers


def _elector(silent_s: float, answers: bool = True) -> tuple[Elector, SimpleNamespace]:
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1, copies=3, workers=1)
    node = SimpleNamespace(cfg=cfg, shard=0, role="replica", cond=threading.Condition(), events=_Events(),
                           links={}, last_heard=time.monotonic() - silent_s)
    elector = Elector(node)
    elector.probe = _Probe(answers)
    return elector, node


REC = ShardRecord(epoch=1, primary="shard-0/0", isr=["shard-0/0", "shard-0/1", "shard-0/2"])


def test_a_silence_first_seen_past_suspect_s_is_probed_and_an_answer_holds_until_the_hold_ends():
    elector, node = _elector(0.31)
    cfg = node.cfg
    assert elector.held_back(REC)                    # asked, answered: held back a heartbeat
    assert elector.probe.asked == [cfg.probe_s] and node.events.seen == ["probe-held"]
    assert elector.held_back(REC)                    # the same silence, still answering: asked again
    assert len(elector.probe.asked) == 2
    node.last_heard = time.monotonic() - cfg.probe_hold_s      # silent for the whole hold: it stands
    elector.answered = node.last_heard
    elector.probed = node.last_heard
    assert not elector.held_back(REC) and len(elector.probe.asked) == 2
    node.last_heard = time.monotonic() - cfg.suspect_s - 0.01  # heard, then silent again: a new silence
    assert elector.held_back(REC) and len(elector.probe.asked) == 3


def test_an_unanswered_probe_lets_the_replica_stand_and_is_not_repeated():
    elector, node = _elector(0.31, answers=False)
    assert not elector.held_back(REC)                # asked, no answer: it stands
    assert not elector.held_back(REC)                # the same silence: not asked again
    assert len(elector.probe.asked) == 1 and node.events.seen == []


class _LateProbe(_Probe):
    """No answer, and the round took `late_s` past its wait: this replica's own process stood
    still (a starved host), so it never read an answer that may have come."""

    def __init__(self, late_s: float) -> None:
        super().__init__(answers=False)
        self.late_s = late_s

    def clears(self, primary: str, epoch: int, timeout: float) -> bool:
        self.asked.append(timeout)
        time.sleep(timeout + self.late_s)
        return False


def test_a_round_this_replica_slept_through_is_no_miss_once_per_silence():
    """The probe that let a replica stand had to be an answer the primary failed to give, not one
    this replica was too starved to read: a late round holds a heartbeat and is asked again; a
    second late round in the same silence counts (a replica late on every round must still replace a
    dead primary), and the `suspect` event's probe record says what the round saw."""
    elector, node = _elector(0.31)
    elector.probe = _LateProbe(0.15)
    assert elector.held_back(REC)                    # late: held, and probed again at the next look
    assert node.events.seen == ["probe-held"] and elector.probed is None
    elector.held_until = 0.0
    assert not elector.held_back(REC)                # late again in the same silence: it stands
    assert len(elector.probe.asked) == 2
    record = elector.last_probe
    assert record["ran"] and not record["answered"] and record["took_ms"] >= record["wait_ms"] + 150
    assert record["misses"] == 1


def test_a_round_that_failed_in_its_wait_is_a_miss():
    elector, node = _elector(0.31, answers=False)
    assert not elector.held_back(REC)
    assert elector.last_probe["ran"] and elector.last_probe["took_ms"] < elector.last_probe["wait_ms"] + 100
