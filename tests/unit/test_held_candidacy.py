"""A replica held back by its probe still stands with a copy that already stands (detector review 2, L6).

R1 cannot reach the primary (its probe fails) and stands; R2's probe is answered, so R2 never
posted its position, R1's window closed without it and R1 won, even when R2 held more: in async
mode the election skipped the most up-to-date copy. Now a suspecting replica that finds another
ISR copy's candidacy for the epoch stands with it, unprobed (psnodes.core.promotion.joins), and
every copy takes its candidacy key back once its window is over, so a key means a window open now.
"""
from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace

from psnodes.config import ClusterConfig, ShardRecord
from psnodes.election import Elector


class _Etcd:
    def __init__(self) -> None:
        self.kv: dict[str, str] = {}
        self.rev = 1

    def get(self, key):
        v = self.kv.get(key)
        return SimpleNamespace(key=key, value=v, mod_revision=self.rev) if v is not None else None

    def get_prefix(self, prefix):
        return [SimpleNamespace(key=k, value=v) for k, v in sorted(self.kv.items()) if k.startswith(prefix)]

    def put(self, key, value, lease=0):
        self.kv[key] = value

    def delete(self, key):
        self.kv.pop(key, None)

    def cas(self, key, revision, value, also_put=()):
        if revision != self.rev:
            return False
        self.kv[key] = value
        self.rev += 1
        return True


class _Probe:
    """The primary answers every probe as primary of the epoch asked."""

    def __init__(self) -> None:
        self.asked = 0

    def clears(self, primary: str, epoch: int, timeout: float) -> bool:
        self.asked += 1
        return True


ISR = ["shard-0/0", "shard-0/1", "shard-0/2"]


def _replica(seq: int) -> tuple[Elector, SimpleNamespace, _Etcd]:
    """shard-0/2, in sync at `seq`, silent past suspect_s; the record names shard-0/0 at epoch 1."""
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1, copies=3, workers=1)
    etcd = _Etcd()
    etcd.put(cfg.shard_key(0), ShardRecord(epoch=1, primary="shard-0/0", isr=ISR).to_json())
    promoted: list[ShardRecord] = []
    node = SimpleNamespace(cfg=cfg, name="shard-0/2", shard=0, role="replica", epoch=1, primary="shard-0/0",
                           cond=threading.Condition(), events=SimpleNamespace(emit=lambda *a: seen.append(a)),
                           links={}, last_heard=time.monotonic() - 0.31, detector=cfg.failure_detector(),
                           store=SimpleNamespace(seq=seq, seq_epoch=1), in_sync=True, lease=0, suspecting=0,
                           etcd=etcd, become_primary=promoted.append, promoted=promoted)
    seen: list = []
    node.seen = seen
    elector = Elector(node)
    elector.probe = _Probe()
    return elector, node, etcd


def _posts(etcd: _Etcd, cfg: ClusterConfig, name: str, seq: int) -> None:
    etcd.put(cfg.candidate_prefix(0, 1) + name, json.dumps({"seq": seq, "seq_epoch": 1}))


def test_a_held_replica_stands_with_a_standing_copy_and_the_newest_wins():
    elector, node, etcd = _replica(seq=10)
    _posts(etcd, node.cfg, "shard-0/1", seq=5)          # R1 stands: its probe failed; it holds less
    elector.suspect()
    assert elector.probe.asked == 0, "a copy already stands: the primary is replaced anyway"
    assert [r.epoch for r in node.promoted] == [2], "the most up-to-date copy was skipped"
    assert json.loads(etcd.kv[node.cfg.shard_key(0)])["primary"] == "shard-0/2"
    suspects = [f for kind, f in node.seen if kind == "suspect"]
    assert suspects and suspects[0]["joined"] == ["shard-0/1"]
    assert node.cfg.candidate_prefix(0, 1) + "shard-0/2" not in etcd.kv, "the candidacy key was left behind"


def test_with_no_copy_standing_an_answering_primary_still_holds_the_replica():
    elector, node, etcd = _replica(seq=10)
    elector.suspect()
    assert elector.probe.asked == 1 and node.promoted == []
    assert etcd.get_prefix(node.cfg.candidate_prefix(0, 1)) == []


def test_a_replica_that_loses_takes_its_candidacy_back():
    elector, node, etcd = _replica(seq=3)
    _posts(etcd, node.cfg, "shard-0/1", seq=5)          # R1 holds more: it wins, we do not swap
    elector.suspect()
    assert node.promoted == [] and json.loads(etcd.kv[node.cfg.shard_key(0)])["primary"] == "shard-0/0"
    assert [k for k, _ in etcd.kv.items() if k.startswith(node.cfg.candidate_prefix(0, 1))] == \
        [node.cfg.candidate_prefix(0, 1) + "shard-0/1"]
