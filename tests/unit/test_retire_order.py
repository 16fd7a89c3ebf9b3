"""A retiring shard group stops its primary last (harness/backend_common.retire_groups).

Stopped first, the primary left its replicas silent while they still followed it; one stood and
was promoted in a shard that owned nothing any more, and the spurious-failover check counted it
(scale-in-shards: 7 in 10 seeds on processes)."""
from __future__ import annotations

from types import SimpleNamespace

from psnodes.config import ShardRecord
from psnodes.etcd import EtcdError

from harness.backend_common import retire_groups, stop_order


class _Etcd:
    def __init__(self, records: dict[str, str] | None, fail: bool = False) -> None:
        self.records, self.fail, self.deleted = records or {}, fail, []

    def get(self, key):
        if self.fail:
            raise EtcdError("etcd down")
        v = self.records.get(key)
        return SimpleNamespace(value=v, mod_revision=1) if v is not None else None

    def cas(self, key, revision, value, also_compare=(), also_delete=()):
        self.deleted.extend(also_delete)     # retirement.forget removes the record
        return True


def _backend(stopped: list[str]):
    cfg = SimpleNamespace(shard_nodes=lambda s: [f"shard-{s}/{i}" for i in range(3)],
                          shard_key=lambda s: f"shard/{s}", leader_key=lambda s: f"leader/{s}",
                          retired_key=lambda s: f"retired/{s}", cluster_id="c")
    return SimpleNamespace(cfg=cfg, active=[0, 1, 2], stop=stopped.append, final_state=lambda n: None)


def test_the_primary_is_stopped_last():
    assert stop_order(["a", "b", "c"], "a") == ["b", "c", "a"]
    assert stop_order(["a", "b", "c"], "c") == ["a", "b", "c"]
    assert stop_order(["a", "b", "c"], None) == ["a", "b", "c"]


def test_retire_groups_reads_the_primary_from_the_shard_record():
    stopped: list[str] = []
    be = _backend(stopped)
    rec = ShardRecord(epoch=3, primary="shard-2/0", isr=["shard-2/0", "shard-2/1"])
    etcd = _Etcd({"shard/2": rec.to_json()})
    retire_groups(be, [2], lambda *a: None, observe=False, running=lambda n: True, etcd=etcd)
    assert stopped == ["shard-2/1", "shard-2/2", "shard-2/0"] and 2 not in be.active


def test_with_etcd_down_the_group_still_stops_in_slot_order():
    stopped: list[str] = []
    retire_groups(_backend(stopped), [2], lambda *a: None, observe=False, running=lambda n: True,
                  etcd=_Etcd(None, fail=True))
    assert stopped == ["shard-2/0", "shard-2/1", "shard-2/2"]
