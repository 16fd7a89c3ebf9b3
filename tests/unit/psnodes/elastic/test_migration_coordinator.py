"""The migration coordinator's compare-and-swap of the routing record when etcd applies a swap and
its answer is lost (etcd killed while answering: the simulated migration-etcd-outage hit this, the
announce failing with "migration ... is still in progress" on its own write)."""
from __future__ import annotations

import pytest

from pschaos.psnodes.elastic import routing
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.core.routing import begin, switched
from pschaos.psnodes.etcd import KV, EtcdError
from pschaos.psnodes.elastic.migration import MigrationFailed, Migrator
from pschaos.psnodes.runtime import Runtime


class LosesAnswers:
    """An etcd whose next `lose` compare-and-swaps are applied and then not answered."""

    def __init__(self, lose: int = 1) -> None:
        self.kv: dict[str, KV] = {}
        self.revision, self.lose = 1, lose

    def get(self, key: str, serializable: bool = False) -> KV | None:
        return self.kv.get(key)

    def cas(self, key: str, expect_mod_revision: int, value, lease: int = 0) -> bool:
        cur = self.kv.get(key)
        if (cur.mod_revision if cur else 0) != expect_mod_revision:
            return False
        self.revision += 1
        self.kv[key] = KV(key, value.encode() if isinstance(value, str) else value, self.revision, 0)
        if self.lose:
            self.lose -= 1
            raise EtcdError("etcd unreachable: connection reset (the server went down while answering)")
        return True

    def healthy(self) -> bool:
        return True


def coordinator(etcd) -> tuple[Migrator, ClusterConfig]:
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=2, max_shards=3, peer_token="p")
    return Migrator(cfg, etcd=etcd, runtime=Runtime(sleep=lambda s: None)), cfg


def test_an_announce_whose_answer_was_lost_is_recognised_as_landed_not_as_another_migration() -> None:
    etcd = LosesAnswers(lose=1)
    m, cfg = coordinator(etcd)
    got = m._swap(lambda r: begin(r, "0.0", (0, 1, 2)), "announce")
    rec, _ = routing.read(etcd, cfg)
    assert got == rec and rec.migration is not None and rec.migration.id == "0.0" and rec.epoch == 0


def test_a_switch_whose_answer_was_lost_is_done_not_failed() -> None:
    etcd = LosesAnswers(lose=0)
    m, cfg = coordinator(etcd)
    m._swap(lambda r: begin(r, "0.0", (0, 1, 2)), "announce")
    etcd.lose = 1
    got = m._swap(lambda r: switched(r, "0.0"), "switch")
    assert got.epoch == 1 and got.shards == (0, 1, 2) and got.migration is None
    assert routing.read(etcd, cfg)[0] == got


def test_a_record_someone_else_moved_still_fails_the_step() -> None:
    etcd = LosesAnswers(lose=0)
    m, cfg = coordinator(etcd)
    m._swap(lambda r: begin(r, "0.0", (0, 1, 2)), "announce")
    with pytest.raises(MigrationFailed, match="still in progress"):
        m._swap(lambda r: begin(r, "1.5", (0, 1)), "announce")
