"""A shard store's side of key migration: export and import of moving keys with their optimizer
state and dedup state, the fence, the switch (ROUTE drops what moved away), and replicas that
take the same entries end up with the same state."""
import json

import numpy as np
import pytest

from pschaos.psnodes.store import moving
from pschaos.psnodes.store.blob import pack, unpack
from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.errors import InvalidArgument
from pschaos.psnodes.store.optimizers import OptimizerConfig
from pschaos.psnodes.placement import owner
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.state import ShardSpec
from pschaos.psnodes.store.store import ShardStore
from pschaos.psnodes.store.updatelog import Entry

SRC, DST = [0, 1], [0, 1, 2]


def mk(shard: int, shards: int = 2) -> ShardStore:
    return ShardStore(ShardSpec(shard=shard, num_shards=shards, optimizer=OptimizerConfig("adam", lr=0.05), seed=3))


def names_moving(n: int = 40) -> tuple[list[str], list[str]]:
    own = [f"p{i}" for i in range(n) if owner(f"p{i}", SRC) == 0]
    return own, [k for k in own if owner(k, DST) == 2]


def apply(s: ShardStore, u: ps_pb2.Update) -> int:
    return s.apply(s.validate(u), u.SerializeToString(), 1)


def internal(kind, meta) -> ps_pb2.Update:
    return ps_pb2.Update(kind=kind, meta=meta if isinstance(meta, bytes) else json.dumps(meta).encode())


def seeded_source() -> tuple[ShardStore, list[str], list[str]]:
    src = mk(0)
    own, moving_keys = names_moving()
    apply(src, ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb(k, np.ones(3)) for k in own]))
    for r in range(1, 4):
        apply(src, ps_pb2.Update(worker="worker-0", incarnation=7, req_id=r,
                                 dense=[tensor_to_pb(k, np.full(3, 0.1)) for k in own]))
    return src, own, moving_keys


def export(src: ShardStore, since: int = 0, part: str = "copy") -> bytes:
    blob, key_bytes, keys = moving.export_keys(src, 2, SRC, DST, since)
    meta, arrays = unpack(blob)
    return pack({**meta, "migration": "m", "part": part}, arrays)


def test_moving_keys_arrive_with_their_state_and_the_source_drops_them_at_the_switch():
    src, own, moving_keys = seeded_source()
    assert moving_keys, "the name population must move some keys to shard 2"
    dst = mk(2)
    apply(dst, internal(ps_pb2.Update.MIGRATE, export(src)))
    for k in moving_keys:
        np.testing.assert_array_equal(dst.dense[k], src.dense[k])
        for slot in ("m", "v"):
            np.testing.assert_array_equal(dst.dense_slots[k][slot], src.dense_slots[k][slot])
        assert dst.dense_steps[k] == 3
    assert "__audit__/2" in dst.dense                 # a new shard gets its pinned audit tensor
    # not owned before the switch: the destination refuses pushes to them (routing epoch 0)
    with pytest.raises(InvalidArgument, match="belongs to shard 0"):
        dst.validate(ps_pb2.Update(worker="w", req_id=1, dense=[tensor_to_pb(moving_keys[0], np.ones(3))]))
    route = internal(ps_pb2.Update.ROUTE, {"migration": "", "epoch": 1, "shards": DST})
    apply(src, route)
    apply(dst, route)
    assert not set(moving_keys) & set(src.dense) and set(own) - set(moving_keys) <= set(src.dense)
    assert src.shape_seq == src.seq                   # a delta from before the drop cannot say so
    dst.validate(ps_pb2.Update(worker="w", req_id=1, dense=[tensor_to_pb(moving_keys[0], np.ones(3))]))


def test_a_push_applied_before_the_fence_is_a_duplicate_at_its_keys_new_owner():
    src, own, moving_keys = seeded_source()
    apply(src, internal(ps_pb2.Update.FENCE, {"migration": "m", "src": SRC, "dst": DST}))
    assert moving.fenced_names(src, own) == moving_keys
    dst = mk(2)
    apply(dst, internal(ps_pb2.Update.MIGRATE, export(src, part="delta")))
    retry = ps_pb2.Update(worker="worker-0", incarnation=7, req_id=2, origin=0,
                          dense=[tensor_to_pb(moving_keys[0], np.ones(3))])
    assert dst.duplicate_of(retry) == (dst.seq, 0)
    fresh = ps_pb2.Update(worker="worker-0", incarnation=7, req_id=9, origin=0)
    assert dst.duplicate_of(fresh) == (None, None)


def test_replicas_taking_the_same_entries_agree_and_a_repeated_import_changes_nothing():
    src, _, _ = seeded_source()
    blob = export(src)
    prim, rep = mk(2), mk(2)
    entries = []
    for u in (internal(ps_pb2.Update.MIGRATE, blob), internal(ps_pb2.Update.MIGRATE, blob),
              internal(ps_pb2.Update.ROUTE, {"migration": "", "epoch": 1, "shards": DST})):
        seq = apply(prim, u)
        entries.append(Entry(seq, 1, u.SerializeToString()))
    before = prim.checksum()
    rep.take_replicated(b"", entries, prim.seq, 1, False)
    assert rep.checksum() == prim.checksum() == before
    snap = mk(2)
    snap.import_state(prim.export_state(0)[0])        # the routing, fence and foreign sets travel too
    assert snap.checksum() == prim.checksum() and snap.routing_epoch == 1


def test_an_import_that_does_not_match_the_shards_tables_is_refused():
    src, _, _ = seeded_source()
    meta, arrays = unpack(export(src))
    arrays = {k: v for k, v in arrays.items() if not k.startswith("ds/")}
    with pytest.raises(InvalidArgument, match="optimizer slot"):
        mk(2).validate(internal(ps_pb2.Update.MIGRATE, pack(meta, arrays)))


def test_a_replica_checks_a_batch_holding_the_switch_and_a_push_routed_by_it():
    """A replica takes [ROUTE to epoch 1, a push of a moved key] in one call: the push must be
    checked against the routing the ROUTE entry sets, not the replica's current one (migration-
    partition-worker seed 2 stalled shard 2's ISR for 20 s on the old code)."""
    src, own, moving_keys = seeded_source()
    prim, rep = mk(2), mk(2)
    entries = []
    push = ps_pb2.Update(worker="worker-1", incarnation=5, req_id=1,
                         dense=[tensor_to_pb(moving_keys[0], np.full(3, 0.1))])
    for u in (internal(ps_pb2.Update.MIGRATE, export(src)),
              internal(ps_pb2.Update.ROUTE, {"migration": "", "epoch": 1, "shards": DST}), push):
        seq = apply(prim, u)
        entries.append(Entry(seq, 1, u.SerializeToString()))
    rep.take_replicated(b"", entries, prim.seq, 1, False)
    assert rep.seq == prim.seq and rep.checksum() == prim.checksum()
