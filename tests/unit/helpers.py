"""Small builders shared by unit tests."""
from __future__ import annotations

import numpy as np

from pschaos.psnodes.wire.codec import rows_to_pb, tensor_to_pb
from pschaos.psnodes.placement import dense_shard, row_shards
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.state import ShardSpec
from pschaos.psnodes.store.store import ShardStore


def store(optimizer: str = "adam", shards: int = 1, shard: int = 0) -> ShardStore:
    from pschaos.psnodes.store.optimizers import OptimizerConfig

    return ShardStore(ShardSpec(shard=shard, num_shards=shards, tables={"emb": 4},
                                optimizer=OptimizerConfig(optimizer, lr=0.05), seed=3, workers=2))


def init(s: ShardStore, name: str = "w", shape=(3, 4), epoch: int = 1) -> int:
    u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb(name, np.ones(shape))])
    return s.apply(s.validate(u), u.SerializeToString(), epoch)


def push_update(req_id: int, worker: str = "worker-0", dense: dict | None = None,
                ids: list[int] | None = None, clock: int = -1) -> ps_pb2.Update:
    u = ps_pb2.Update(worker=worker, req_id=req_id, clock=clock)
    for n, g in (dense or {}).items():
        u.dense.append(tensor_to_pb(n, g))
    if ids:
        u.sparse.append(rows_to_pb("emb", np.array(ids), np.full((len(ids), 4), 0.1), 4))
    return u


def push(s: ShardStore, u: ps_pb2.Update, epoch: int = 1) -> int:
    return s.apply(s.validate(u), u.SerializeToString(), epoch)


__all__ = ["store", "init", "push_update", "push", "dense_shard", "row_shards"]


def only(sc, why: str = "a test of the harness' mechanics judges only the checks it names"):
    """`sc` judging only the checks it names: every other default excluded, with `why` (a
    scenario runs every check that applies unless it excludes one with a reason)."""
    return sc.model_copy(update={"expect": sc.expect_only(list(sc.expect.checks), why)})


def only_text(text: str, why: str = "a test of the harness' mechanics judges only the checks it names") -> str:
    """A scenario file's text with every default check it does not name excluded, with `why`."""
    import yaml

    from pschaos.harness.run.scenario import Scenario

    doc = yaml.safe_load(text)
    sc = Scenario.model_validate(doc)
    doc.setdefault("expect", {})["exclude"] = only(sc, why).expect.exclude
    return yaml.safe_dump(doc, sort_keys=False)
