"""pschaos.psnodes.store.digest: the state digest both shells put in a delta pull's reply and the client
computes over its assembled copy (check pulled-copy-matches)."""
import numpy as np
import pytest

from pschaos.psnodes.store.digest import dense_digest, wants_digest
from pschaos.psnodes.proto import ps_pb2


def test_the_digest_is_of_names_shapes_and_values_not_of_insertion_order():
    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.ones(4, np.float32)
    d = dense_digest({"a": a, "b": b})
    assert d == dense_digest({"b": b, "a": a})
    assert d == dense_digest({"a": np.asfortranarray(a), "b": b})        # layout is not state
    assert d == dense_digest({"a": a.astype(np.float64), "b": b})        # the wire's float32 bytes
    assert d != dense_digest({"a": a.reshape(3, 2), "b": b})
    assert d != dense_digest({"a": a, "c": b})
    c = b.copy()
    c[3] = np.nextafter(np.float32(1), np.float32(2))                    # one ulp
    assert d != dense_digest({"a": a, "b": c})
    assert d != dense_digest({"a": a})                                   # a tensor missing from the copy
    assert dense_digest({"s": np.ones((), np.float32)}) != dense_digest({"s": np.ones(1, np.float32)})
    assert dense_digest({"e": np.zeros((0, 3), np.float32)}) != dense_digest({"e": np.zeros((3, 0), np.float32)})
    assert 0 <= d < 1 << 32 and dense_digest({}) == 0


def test_a_value_that_is_not_an_array_is_refused_by_name():
    with pytest.raises(TypeError, match="'w' is a list"):
        dense_digest({"w": [1.0]})


def test_only_a_delta_pull_of_the_whole_shard_wants_the_digest():
    assert wants_digest(ps_pb2.PullRequest(since_seq=3))
    assert not wants_digest(ps_pb2.PullRequest(since_seq=0))
    assert not wants_digest(ps_pb2.PullRequest(since_seq=3, names=["w"]))
    assert not wants_digest(ps_pb2.PullRequest(since_seq=3, no_dense=True))
