"""The hand-rolled encoders are byte-compatible with the generated protobuf classes."""
import numpy as np
import pytest

from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.updatelog import Entry
from pschaos.psnodes.wire.wire import encode_pull_reply, encode_replicate, split_push, varint


def test_split_push_gives_the_update_bytes():
    upd = ps_pb2.Update(worker="w", req_id=300, dense=[tensor_to_pb("x", np.arange(1000))])
    raw = ps_pb2.PushRequest(shard=3, epoch=7, update=upd).SerializeToString()
    req, payload = split_push(raw)
    assert (req.shard, req.epoch) == (3, 7)
    assert bytes(payload) == upd.SerializeToString()
    assert ps_pb2.Update.FromString(payload) == upd


def test_split_push_keeps_the_incarnation_of_the_idempotency_key():
    inc = 1_712_345_678_901_234                   # time.time_ns() // 1000: above 2**32
    upd = ps_pb2.Update(worker="worker-3", incarnation=inc, req_id=7, clock=2,
                        dense=[tensor_to_pb("x", np.ones(4))])
    raw = ps_pb2.PushRequest(shard=1, epoch=2, update=upd).SerializeToString()
    req, payload = split_push(raw)
    got = ps_pb2.Update.FromString(payload)
    assert (got.worker, got.incarnation, got.req_id) == ("worker-3", inc, 7)
    assert req.update.incarnation == inc and bytes(payload) == upd.SerializeToString()


def test_split_push_skips_fixed_width_fields_it_does_not_know():
    upd = ps_pb2.Update(worker="w", incarnation=5, req_id=1)
    raw = ps_pb2.PushRequest(shard=1, update=upd).SerializeToString()
    extra = varint((9 << 3) | 1) + bytes(8) + varint((10 << 3) | 5) + bytes(4)   # fixed64, fixed32
    req, payload = split_push(extra + raw)
    assert req.shard == 1 and ps_pb2.Update.FromString(payload) == upd


def test_pull_reply_parses_back():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    ids, rows = np.array([5, 1 << 40], dtype=np.int64), np.ones((2, 8), dtype=np.float32)
    raw = encode_pull_reply(2, 99, "shard-0/1", [("w", a.shape, memoryview(a).cast("B"))],
                            [("emb", ids.tobytes(), 8, rows.tobytes())])
    r = ps_pb2.PullReply.FromString(raw)
    assert (r.epoch, r.seq, r.node) == (2, 99, "shard-0/1") and r.bytes > 0
    t = r.dense[0]
    assert (t.name, list(t.shape), t.dtype) == ("w", [3, 4], "float32")
    np.testing.assert_array_equal(np.frombuffer(t.data, np.float32).reshape(3, 4), a)
    assert np.frombuffer(r.sparse[0].ids, np.int64).tolist() == ids.tolist() and r.sparse[0].dim == 8


@pytest.mark.parametrize("crc", [None, 0, 1, (1 << 32) - 1])
def test_pull_reply_state_crc_has_presence(crc):
    r = ps_pb2.PullReply.FromString(encode_pull_reply(3, 7, "shard-0/0", [], [], crc))
    assert r.HasField("state_crc") is (crc is not None) and (crc is None or r.state_crc == crc)
    assert (r.epoch, r.seq, r.node) == (3, 7, "shard-0/0")


def test_pull_reply_refuses_a_state_crc_that_is_not_a_crc32():
    with pytest.raises(ValueError, match="state_crc"):
        encode_pull_reply(3, 7, "n", [], [], 1 << 32)


def test_replicate_request_parses_back():
    es = [Entry(4, 2, memoryview(b"abc")), Entry(5, 2, b"")]
    raw = encode_replicate(1, 2, "shard-1/0", es, 5, 3, b"state")
    r = ps_pb2.ReplicateRequest.FromString(raw)
    assert (r.shard, r.epoch, r.primary, r.primary_seq, r.epoch_start, r.state) == (1, 2, "shard-1/0", 5, 3, b"state")
    assert [(e.seq, e.epoch, e.payload) for e in r.entries] == [(4, 2, b"abc"), (5, 2, b"")]
    empty = ps_pb2.ReplicateRequest.FromString(encode_replicate(0, 1, "p", [], 0, 0))
    assert empty.epoch == 1 and not empty.entries


def test_varint():
    assert varint(0) == b"\x00" and varint(300) == b"\xac\x02"


def test_varint_table_and_loop_agree_and_a_negative_is_refused():
    from pschaos.psnodes.wire.wire import _varint, read_varint
    for n in (0, 1, 127, 128, 300, 16383, 16384, 1 << 35, (1 << 64) - 1):
        assert varint(n) == _varint(n)
        assert read_varint(memoryview(varint(n)), 0) == (n, len(varint(n)))
    with pytest.raises(ValueError, match="negative"):
        varint(-1)


@pytest.mark.parametrize("committed", [None, 0, 7])
def test_pull_reply_committed_has_presence(committed):
    r = ps_pb2.PullReply.FromString(encode_pull_reply(3, 7, "shard-0/0", [], [], None, 0, committed))
    assert r.HasField("committed") is (committed is not None) and (committed is None or r.committed == committed)


def test_the_watermark_is_the_lowest_seq_an_in_sync_copy_applied():
    from pschaos.psnodes.core.ack import Replicas, watermark

    r = Replicas("a", ["a", "b", "c"], {"a": 9, "b": 7, "c": 8})
    assert watermark(r, 9) == 7
    assert watermark(Replicas("a", ["a"], {}), 9) == 9            # the primary alone: its own seq
    assert watermark(Replicas("a", ["a", "b"], {}), 9) == 0       # a peer that acked nothing yet
