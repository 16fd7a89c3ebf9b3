"""A push split by a migration is several idempotency identities, one per part (review 1a).

The interleaving the review found, at the store and client level: 2 -> 3 shards, then 3 -> 2
(under rendezvous hashing the moved keys go straight back). A push R numbered for shard 0 holds
k_stay (stays on 0) and k_move (0 -> 2 -> 0); the fence refuses it, the client splits it into
P0 (k_stay, to shard 0) and P2 (k_move, to shard 2); before P2 lands the scale-in fences shard 2,
so P2 is split again, to shard 0. Neither part may be answered as a duplicate of the other
(an acked gradient dropped), whichever lands first; a part of a push that was applied whole
before the fence is still a duplicate (never applied twice)."""
from types import SimpleNamespace

import numpy as np

from pschaos.psnodes.store import moving
from pschaos.psnodes.store.blob import pack, unpack
from pschaos.psnodes.client.client import PSClient
from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.core.routing import Routing
from pschaos.psnodes.store.optimizers import OptimizerConfig
from pschaos.psnodes.placement import owner
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.state import ShardSpec
from pschaos.psnodes.store.store import ShardStore
from tests.unit.psnodes.store.test_store_migration import internal

TWO, THREE = (0, 1), (0, 1, 2)
STAY = next(f"p{i}" for i in range(200) if owner(f"p{i}", TWO) == 0 and owner(f"p{i}", THREE) == 0)
MOVE = next(f"p{i}" for i in range(200) if owner(f"p{i}", TWO) == 0 and owner(f"p{i}", THREE) == 2)


def mk(shard: int) -> ShardStore:
    return ShardStore(ShardSpec(shard=shard, num_shards=3, optimizer=OptimizerConfig("sgd", lr=1.0), seed=3))


def apply(s: ShardStore, u: ps_pb2.Update) -> int:
    return s.apply(s.validate(u), u.SerializeToString(), 1)


def regroup(shards: tuple, shard: int, upd: ps_pb2.Update) -> dict[int, ps_pb2.Update]:
    """The client's own re-routing of a push refused as stale, with the routing `shards`."""
    me = SimpleNamespace(routing=Routing(1, shards), _add_audit=lambda s, u: None)
    return PSClient._regroup(me, shard, upd)


def grad(name: str) -> ps_pb2.Tensor:
    return tensor_to_pb(name, np.ones(3, np.float32))


def cluster() -> tuple[ShardStore, ShardStore, ps_pb2.Update]:
    s0, s2 = mk(0), mk(2)
    apply(s0, ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb(STAY, np.zeros(3))]))
    apply(s2, ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb(MOVE, np.zeros(3))]))
    push = ps_pb2.Update(worker="worker-0", incarnation=7, req_id=5, dense=[grad(STAY), grad(MOVE)])
    return s0, s2, push


def scale_in(s2: ShardStore, s0: ShardStore) -> None:
    """3 -> 2: shard 2's keys (with its whole applied set) go to shard 0, which then adopts the routing."""
    blob, _, _ = moving.export_keys(s2, 0, THREE, TWO, 0)
    meta, arrays = unpack(blob)
    apply(s0, internal(ps_pb2.Update.MIGRATE, pack({**meta, "migration": "m2", "part": "handoff"}, arrays)))
    apply(s0, internal(ps_pb2.Update.ROUTE, {"migration": "m2", "epoch": 2, "shards": list(TWO)}))


def test_a_part_that_came_back_to_its_origin_is_not_a_duplicate_of_its_sibling():
    s0, s2, push = cluster()
    parts = regroup(THREE, 0, push)                   # refused by shard 0's fence, split at epoch 1
    assert sorted(parts) == [0, 2]
    assert apply(s0, parts[0])                        # P0 (k_stay) applied on shard 0
    back = regroup(TWO, 2, parts[2])                  # P2 refused by shard 2's fence: back to shard 0
    assert sorted(back) == [0]
    scale_in(s2, s0)
    dup, applied_on = s0.duplicate_of(back[0])
    assert dup is None, "k_move's part was answered as a duplicate of k_stay's: its gradient is lost"
    apply(s0, back[0])
    np.testing.assert_array_equal(s0.dense[MOVE], -np.ones(3, np.float32))
    np.testing.assert_array_equal(s0.dense[STAY], -np.ones(3, np.float32))
    assert s0.duplicate_of(back[0])[0] is not None and s0.duplicate_of(parts[0])[0] is not None


def test_a_shipped_applied_set_does_not_answer_a_sibling_part():
    s0, s2, push = cluster()
    parts = regroup(THREE, 0, push)
    assert apply(s2, parts[2])                        # P2 (k_move) applied on shard 2 first
    scale_in(s2, s0)                                  # shard 2's applied set ships to shard 0
    dup, applied_on = s0.duplicate_of(parts[0])       # P0 (k_stay), delayed, lands on shard 0 now
    assert dup is None, "k_stay's part was answered from shard 2's applied set: its gradient is lost"
    apply(s0, parts[0])
    np.testing.assert_array_equal(s0.dense[STAY], -np.ones(3, np.float32))
    assert s0.duplicate_of(parts[2])[0] is not None   # P2 retried: it was applied, on shard 2
    assert s0.duplicate_as(parts[2])[1] == 2


def test_the_parts_of_a_push_applied_whole_are_duplicates_wherever_they_go():
    s0, s2, push = cluster()
    s0.dense[MOVE] = np.zeros(3, np.float32)          # epoch 0, two shards: shard 0 holds both keys
    s0.dense_slots[MOVE], s0.dense_steps[MOVE], s0.dense_mod[MOVE] = {}, 0, 1
    s0.shards = TWO
    apply(s0, push)                                   # applied whole before the fence; the ack was lost
    blob, _, _ = moving.export_keys(s0, 2, TWO, THREE, 0)
    meta, arrays = unpack(blob)
    s2b = mk(2)
    apply(s2b, internal(ps_pb2.Update.MIGRATE, pack({**meta, "migration": "m1", "part": "handoff"}, arrays)))
    parts = regroup(THREE, 0, push)
    assert s0.duplicate_of(parts[0])[0] is not None
    dup, applied_on, applied_as = s2b.duplicate_as(parts[2])
    assert dup is not None and applied_on == 0 and applied_as == "worker-0#7@0"
