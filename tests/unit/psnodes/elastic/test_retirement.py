"""psnodes/elastic/retirement.py: a retired shard's record and leader key go in one transaction that keeps
its last epoch; and the checks take a re-added shard's first term (a bootstrap above epoch 1) for
no failover."""
from __future__ import annotations

import pytest

from pschaos.harness.checkers.spurious import judge
from pschaos.harness.run.metrics import failovers
from pschaos.psnodes.elastic import retirement
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.etcd import EtcdError
from tests.unit.psnodes.server.test_restore import MemEtcd
from tests.unit.harness.checkers.test_spurious import BOOT, promote

CFG = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=2, max_shards=3)


class TxnEtcd(MemEtcd):
    """MemEtcd with the deletes of a transaction; `churn` rewrites the record before each swap
    (a stopping group's primary shrinking its ISR), that many times."""

    def __init__(self) -> None:
        super().__init__()
        self.churn = 0

    def cas(self, key, expect_mod_revision, value, lease=0, also_put=(), also_compare=(), also_delete=()) -> bool:
        if self.churn:
            self.churn -= 1
            self.put(CFG.shard_key(2), self.kv[CFG.shard_key(2)][0])
        if not super().cas(key, expect_mod_revision, value, lease, also_put, also_compare):
            return False
        for k in also_delete:
            self.delete(k)
        return True


def test_forget_removes_the_record_and_leader_and_keeps_the_epoch() -> None:
    etcd = TxnEtcd()
    etcd.put(CFG.shard_key(2), ShardRecord(epoch=3, primary="shard-2/1", isr=["shard-2/1"]).to_json())
    etcd.put(CFG.leader_key(2), "shard-2/1")
    etcd.churn = 2
    assert retirement.forget(etcd, CFG, 2) == 3
    assert etcd.get(CFG.shard_key(2)) is None and etcd.get(CFG.leader_key(2)) is None
    assert retirement.retired_epoch(etcd, CFG, 2) == 3
    assert retirement.forget(etcd, CFG, 2) is None            # nothing left: nothing to do
    etcd.put(CFG.shard_key(2), ShardRecord(epoch=2, primary="shard-2/0", isr=[]).to_json())
    assert retirement.forget(etcd, CFG, 2) == 3               # never below an earlier life's
    assert retirement.retired_epoch(etcd, CFG, 1) == 0


def test_a_record_that_never_stops_changing_is_an_error_not_a_silent_keep() -> None:
    etcd = TxnEtcd()
    etcd.put(CFG.shard_key(2), ShardRecord(epoch=1, primary="shard-2/0", isr=[]).to_json())
    etcd.churn = retirement.ATTEMPTS
    with pytest.raises(EtcdError, match="kept changing"):
        retirement.forget(etcd, CFG, 2)


def test_a_re_added_shard_s_first_term_is_no_failover() -> None:
    readded = promote(9.0, 2, 2, "shard-2/0")
    readded["value"]["bootstrap"] = True
    h = BOOT + [promote(1.0, 2, 1, "shard-2/1"), readded]
    assert failovers(h) == 0
    assert judge(h).valid is True and judge(h).details["count"] == 0
    del readded["value"]["bootstrap"]
    assert failovers(h) == 1 and judge(h).details["count"] == 1
