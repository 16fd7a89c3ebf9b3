import numpy as np
import pytest

from pschaos.psnodes.store.applied import idem_key
from pschaos.psnodes.wire.codec import rows_to_pb, tensor_to_pb
from pschaos.psnodes.errors import InvalidArgument, NotFound
from pschaos.psnodes.proto import ps_pb2

from tests.unit.helpers import init, push, push_update, store


def test_seq_and_log_grow_per_update():
    s = store()
    assert init(s) == 1
    assert push(s, push_update(1, dense={"w": np.full((3, 4), 0.1)})) == 2
    assert s.seq == 2 and s.log.last_seq == 2
    assert [e.seq for e in s.log.since(0)] == [1, 2]


def test_replica_replaying_the_log_has_the_same_checksum():
    a, b = store(), store()
    init(a)
    for i in range(10):
        push(a, push_update(i, dense={"w": np.full((3, 4), 0.01 * i)}, ids=[i, i + 1, 7]))
    for e in a.log.since(0):
        b.apply_entry(e)
    assert a.checksum() == b.checksum()
    push(a, push_update(99, ids=[1]))
    assert a.checksum() != b.checksum()


def test_init_is_set_if_absent():
    s = store()
    init(s)
    u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb("w", np.zeros((3, 4)))])
    dec = s.validate(u)
    assert s.is_noop(dec)
    assert s.dense["w"][0, 0] == 1.0


def test_embedding_rows_created_on_push_not_on_read():
    s = store()
    before = s.checksum()
    ids, rows, dim = s.pull_rows("emb", np.array([5, 6]))
    assert rows.shape == (2, 4) and s.tables["emb"].n == 0 and s.checksum() == before
    push(s, push_update(1, ids=[5]))
    assert s.tables["emb"].n == 1
    # an untouched id still reads as its deterministic initializer
    _, again, _ = s.pull_rows("emb", np.array([6]))
    np.testing.assert_array_equal(again[0], rows[1])


def test_pull_dense_since_returns_only_changed():
    s = store()
    init(s, "a")
    init(s, "b")
    seq = push(s, push_update(1, dense={"a": np.full((3, 4), 0.1)}))
    assert [n for n, _ in s.pull_dense(0, [])] == ["a", "b"]
    assert [n for n, _ in s.pull_dense(seq - 1, [])] == ["a"]
    assert s.pull_dense(seq, []) == []


BAD = [
    ("dtype", lambda: ps_pb2.Update(worker="w", dense=[ps_pb2.Tensor(name="w", shape=[3, 4], dtype="float64",
                                                                      data=bytes(96))]), InvalidArgument, "dtype"),
    ("shape", lambda: push_update(1, dense={"w": np.zeros((4, 3))}), InvalidArgument, "shape"),
    ("bytes", lambda: ps_pb2.Update(worker="w", dense=[ps_pb2.Tensor(name="w", shape=[3, 4], dtype="float32",
                                                                      data=bytes(7))]), InvalidArgument, "bytes"),
    ("nan", lambda: push_update(1, dense={"w": np.full((3, 4), np.nan)}), InvalidArgument, "NaN"),
    ("inf", lambda: push_update(1, ids=[1]) if False else ps_pb2.Update(
        worker="w", sparse=[rows_to_pb("emb", np.array([1]), np.full((1, 4), np.inf), 4)]), InvalidArgument, "Inf"),
    ("table", lambda: ps_pb2.Update(worker="w", sparse=[rows_to_pb("nope", np.array([1]), np.ones((1, 4)), 4)]),
     InvalidArgument, "unknown table"),
    ("negative", lambda: ps_pb2.Update(worker="w", sparse=[rows_to_pb("emb", np.array([-3]), np.ones((1, 4)), 4)]),
     InvalidArgument, "negative"),
    ("dim", lambda: ps_pb2.Update(worker="w", sparse=[rows_to_pb("emb", np.array([1]), np.ones((1, 5)), 5)]),
     InvalidArgument, "dim"),
    ("uninitialized", lambda: push_update(1, dense={"zz": np.zeros(2)}), NotFound, "INIT"),
    ("no-worker", lambda: push_update(1, worker="", dense={"w": np.zeros((3, 4))}), InvalidArgument, "worker"),
]


@pytest.mark.parametrize("name,make,exc,words", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_field_and_changes_nothing(name, make, exc, words):
    s = store()
    init(s)
    push(s, push_update(1, ids=[1, 2]))
    before, seq = s.checksum(), s.seq
    with pytest.raises(exc) as e:
        s.validate(make())
    assert words in str(e.value)
    assert s.checksum() == before and s.seq == seq


def test_key_of_another_shard_is_refused():
    from tests.unit.helpers import dense_shard

    s = store(shards=4, shard=0)
    name = next(f"t{i}" for i in range(100) if dense_shard(f"t{i}", 4) != 0)
    u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb(name, np.ones(2))])
    with pytest.raises(InvalidArgument, match="belongs to shard"):
        s.validate(u)


def test_full_export_import_roundtrip():
    a = store()
    init(a)
    for i in range(5):
        push(a, push_update(i, dense={"w": np.full((3, 4), 0.1)}, ids=[i * 10, 3]))
    b = store()
    blob, raw = a.export_state(0)
    b.import_state(blob)
    assert b.checksum() == a.checksum() and b.seq == a.seq and raw > 0
    assert b.applied.contains(idem_key("worker-0", 0), 4) and b.pushes == 5


def test_delta_since_moves_only_changed_keys():
    a, b = store(), store()
    init(a)
    for i in range(50):
        push(a, push_update(i, ids=list(range(i * 20, i * 20 + 20))))
    blob, _ = a.export_state(0)
    b.import_state(blob)
    for i in range(50, 53):
        push(a, push_update(i, ids=[1, 2, 3]), epoch=2)
    assert a.matches(b.seq, b.seq_epoch)
    delta, changed = a.export_state(b.seq)
    full, _ = a.export_state(0)
    assert len(delta) < len(full) / 10
    assert len(delta) <= 1.1 * changed + 2048
    b.import_state(delta)
    assert b.checksum() == a.checksum() and b.epochs == a.epochs


def test_delta_at_wrong_seq_is_refused():
    a, b = store(), store()
    init(a)
    push(a, push_update(1, ids=[1]))
    delta, _ = a.export_state(1)
    with pytest.raises(InvalidArgument, match="delta starts at seq 1"):
        b.import_state(delta)


def test_log_matching_by_epoch_history():
    a = store()
    init(a, epoch=1)
    push(a, push_update(1, ids=[1]), epoch=1)
    push(a, push_update(2, ids=[1]), epoch=3)
    assert a.epoch_of(1) == 1 and a.epoch_of(2) == 1 and a.epoch_of(3) == 3
    assert a.matches(2, 1) and not a.matches(3, 2) and not a.matches(9, 3) and a.matches(0, 0)


def test_a_push_moves_its_workers_clock_to_its_step_plus_one():
    s = store()
    init(s)
    push(s, push_update(1, worker="worker-0", clock=4, ids=[1]))
    assert s.clocks.get("worker-0") == 5 and "worker-1" not in s.clocks
    push(s, push_update(2, worker="worker-1", clock=2, ids=[1]))
    assert s.clocks.get("worker-1") == 3


def test_restarted_worker_is_a_new_key_and_its_clock_stays_by_name():
    """Bug 4.1: a new process starts its ids at 1 again; only the same incarnation is a retry."""
    s = store()
    init(s)
    first = push_update(1, clock=5, ids=[1])
    first.incarnation = 1000
    push(s, first)
    assert s.duplicate_seq(first) == 2
    again = push_update(1, clock=0, ids=[2])
    again.incarnation = 2000                     # restarted: same name, same req_id, new process
    assert s.duplicate_seq(again) is None
    push(s, again)
    assert s.pushes == 2 and set(s.applied.ranges) == {"worker-0#1000", "worker-0#2000"}
    assert s.clocks == {"worker-0": 6}           # BSP/SSP clocks key by the bare worker name
