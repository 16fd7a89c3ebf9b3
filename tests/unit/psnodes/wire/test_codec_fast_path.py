"""tensor_from_pb and dense_elements check without formatting a message on the hot path; the
fast path must accept exactly what the step-by-step checks accept and raise the same error."""
from __future__ import annotations

import numpy as np
import pytest

from pschaos.psnodes.wire.codec import _checked_tensor, check_shape, dense_elements, element_count, tensor_from_pb
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.wire.limits import Limits
from pschaos.psnodes.proto import ps_pb2

LIM = Limits(max_dims=3, max_elements=64, max_name_bytes=8)


def tensors():
    ok = np.arange(6, dtype=np.float32).tobytes()
    yield ps_pb2.Tensor(name="w", shape=[2, 3], dtype="float32", data=ok)
    yield ps_pb2.Tensor(name="w", shape=[], dtype="float32", data=ok[:4])
    yield ps_pb2.Tensor(name="w", shape=[0, 99], dtype="float32", data=b"")      # a zero dim, one over the cap
    yield ps_pb2.Tensor(name="w", shape=[0, 9], dtype="float32", data=b"")
    yield ps_pb2.Tensor(name="", shape=[2, 3], dtype="float32", data=ok)
    yield ps_pb2.Tensor(name="ééééé", shape=[2, 3], dtype="float32", data=ok)    # 10 bytes > 8
    yield ps_pb2.Tensor(name="éé", shape=[2, 3], dtype="float32", data=ok)       # 4 bytes
    yield ps_pb2.Tensor(name="w", shape=[2, 3], dtype="float64", data=ok)
    yield ps_pb2.Tensor(name="w", shape=[2, -3], dtype="float32", data=ok)
    yield ps_pb2.Tensor(name="w", shape=[1, 1, 1, 1], dtype="float32", data=ok[:4])
    yield ps_pb2.Tensor(name="w", shape=[8, 9], dtype="float32", data=b"\0" * 288)
    yield ps_pb2.Tensor(name="w", shape=[2, 3], dtype="float32", data=ok[:20])
    yield ps_pb2.Tensor(name="w", shape=[2], dtype="float32", data=np.array([1, np.nan], np.float32).tobytes())


def outcome(f, *a):
    try:
        r = f(*a)
        return ("ok", r.tobytes(), r.shape) if isinstance(r, np.ndarray) else ("ok", r)
    except PSError as e:
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("finite", [True, False])
def test_the_fast_path_accepts_and_refuses_as_the_slow_checks(finite):
    for t in tensors():
        assert outcome(tensor_from_pb, t, "dense", finite, LIM) == outcome(_checked_tensor, t, "dense", finite, LIM), t


def test_element_count_is_none_exactly_when_check_shape_raises():
    for shape in ([], [0, 99], [0, 9], [8, 8], [8, 9], [65], [-1], [1, 1, 1, 1], [2, 3]):
        slow = outcome(check_shape, shape, "s", LIM)
        assert (element_count(shape, LIM) is None) == (slow[0] != "ok"), shape
        t = ps_pb2.Tensor(name="w", shape=shape)
        if slow[0] == "ok":
            assert dense_elements(t, "dense", LIM) == slow[1]
        else:
            with pytest.raises(PSError):
                dense_elements(t, "dense", LIM)


def test_numpy_dimensions_do_not_wrap():
    shape = [np.int64(65536)] * 4                 # 2**64 elements: an int64 product wraps to 0
    assert element_count(shape, Limits()) is None
    with pytest.raises(PSError):
        check_shape(shape, "s", Limits())
