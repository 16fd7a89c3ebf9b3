"""A retiring shard group's record leaves etcd before its copies stop, and its primary stops last
(harness/backends/observe.retire_groups).

Stopped first, the primary left its replicas silent while they still followed it; one stood and
was promoted in a shard that owned nothing any more, and the spurious-failover check counted it
(scale-in-shards: 7 in 10 seeds on processes). Stopping the primary last still let that happen
when etcd could not name the primary or the record moved between that read and the stops
(detector review 2, L8); with the record gone first, no replica stands at all."""
from __future__ import annotations

from types import SimpleNamespace

from pschaos.psnodes.config import ShardRecord
from pschaos.psnodes.etcd import EtcdError

from pschaos.harness.backends.observe import retire_groups, stop_order


class _Etcd:
    """Shard records in a dict; every call is logged in `log`, which the backend's stops share."""

    def __init__(self, records: dict[str, str] | None, fail: bool = False, log: list | None = None) -> None:
        self.records, self.fail, self.deleted = dict(records or {}), fail, []
        self.log = log if log is not None else []

    def get(self, key):
        if self.fail:
            raise EtcdError("etcd down")
        v = self.records.get(key)
        return SimpleNamespace(value=v, mod_revision=1) if v is not None else None

    def cas(self, key, revision, value, also_compare=(), also_delete=()):
        self.log.append(("forget", key, value))
        self.deleted.extend(also_delete)     # retirement.forget removes the record
        for k in also_delete:
            self.records.pop(k, None)
        self.records[key] = value
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


def test_the_record_leaves_etcd_before_any_copy_stops_and_its_epoch_stays():
    log: list = []
    be = _backend(stopped := [])
    be.stop = lambda n: (stopped.append(n), log.append(("stop", n)))
    rec = ShardRecord(epoch=3, primary="shard-2/0", isr=["shard-2/0", "shard-2/1"])
    etcd = _Etcd({"shard/2": rec.to_json()}, log=log)
    retire_groups(be, [2], lambda *a: None, observe=False, running=lambda n: True, etcd=etcd)
    assert log[0] == ("forget", "retired/2", "3"), log      # the epoch floor of a later re-add
    assert [e[0] for e in log[1:]] == ["stop"] * 3, log
    assert "shard/2" in etcd.deleted and "shard/2" not in etcd.records
    assert stopped == ["shard-2/1", "shard-2/2", "shard-2/0"]


def test_a_record_written_while_the_group_stopped_is_removed_too():
    """A copy restarted meanwhile may bootstrap a record; the second removal takes it."""
    be = _backend(stopped := [])
    etcd = _Etcd({"shard/2": ShardRecord(epoch=3, primary="shard-2/0", isr=["shard-2/0"]).to_json()})

    def stop(n):
        stopped.append(n)
        if n == "shard-2/1":
            etcd.records["shard/2"] = ShardRecord(epoch=4, primary="shard-2/0", isr=["shard-2/0"]).to_json()
    be.stop = stop
    retire_groups(be, [2], lambda *a: None, observe=False, running=lambda n: True, etcd=etcd)
    assert "shard/2" not in etcd.records and etcd.records["retired/2"] == "4"


def test_a_record_etcd_would_not_remove_is_said():
    said: list = []
    stopped: list = []
    retire_groups(_backend(stopped), [2], lambda kind, v: said.append((kind, v.get("when"))), observe=False,
                  running=lambda n: True, etcd=_Etcd(None, fail=True))
    # both tries are said: the one before the stops (the stop order is then all that is left) and after
    assert said == [("shard-record-kept", "before-stop"), ("shard-record-kept", None)] and len(stopped) == 3
