"""The hand-walked Push decoder accepts and rejects exactly what the generated protobuf parser
does, and hands the log exactly the Update the primary applies (differential, over arbitrary
bytes and over valid requests with unusual encodings)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.errors import InvalidArgument
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.wire.wire import split_push, varint


def check(raw: bytes) -> None:
    try:
        want = ps_pb2.PushRequest.FromString(raw)
    except Exception:       # noqa: BLE001 - protobuf refuses: so must we, with INVALID_ARGUMENT
        with pytest.raises(InvalidArgument):
            split_push(raw)
        return
    req, payload = split_push(raw)
    assert req == want
    if len(payload):
        assert ps_pb2.Update.FromString(bytes(payload)) == want.update
    else:
        assert want.update.SerializeToString() == b""


def field(num: int, wt: int, body: bytes) -> bytes:
    return varint((num << 3) | wt) + body


def length(num: int, data: bytes) -> bytes:
    return field(num, 2, varint(len(data)) + data)


UPDATES = st.builds(
    lambda kind, worker, req, clock, n: ps_pb2.Update(
        kind=kind, worker=worker, req_id=req, clock=clock,
        dense=[tensor_to_pb(f"p{i}", np.full(i + 1, i, dtype=np.float32)) for i in range(n)]),
    st.integers(0, 5), st.text(max_size=8), st.integers(0, 2**64 - 1), st.integers(-2**63, 2**63 - 1),
    st.integers(0, 3))

UNKNOWN = st.one_of(
    st.builds(lambda n, v: field(n, 0, varint(v)), st.integers(4, 99), st.integers(0, 2**64 - 1)),
    st.builds(lambda n, b: field(n, 1, b), st.integers(4, 99), st.binary(min_size=8, max_size=8)),
    st.builds(lambda n, b: field(n, 5, b), st.integers(4, 99), st.binary(min_size=4, max_size=4)),
    st.builds(lambda n, b: length(n, b), st.integers(4, 99), st.binary(max_size=16)),
    st.builds(lambda n, inner: field(n, 3, inner) + varint((n << 3) | 4), st.integers(1, 99),
              st.builds(lambda v: field(7, 0, varint(v)), st.integers(0, 300))),
    # the update field itself with a wrong wire type: protobuf keeps it as an unknown field
    st.builds(lambda v: field(3, 0, varint(v)), st.integers(0, 2**32)),
    st.just(field(3, 3, b"") + varint((3 << 3) | 4)),
)


@settings(max_examples=3000, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_are_taken_or_refused_as_protobuf_does(raw):
    check(raw)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(UPDATES.map(lambda u: length(3, u.SerializeToString())), UNKNOWN,
                          st.builds(lambda s: field(1, 0, varint(s)), st.integers(0, 2**32)),
                          st.builds(lambda e: field(2, 0, varint(e)), st.integers(0, 2**64 - 1))),
                max_size=6))
def test_valid_requests_with_repeats_and_unknown_fields_keep_the_applied_update(parts):
    check(b"".join(parts))


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(UPDATES.map(lambda u: length(3, u.SerializeToString())), UNKNOWN), max_size=4),
       st.integers(0, 40), st.binary(max_size=3))
def test_truncated_and_mutated_requests(parts, cut, junk):
    raw = b"".join(parts)
    check(raw[:cut])
    check(raw + junk)
    if raw:
        check(raw[:len(raw) // 2] + junk + raw[len(raw) // 2:])


def test_a_repeated_update_field_is_logged_merged_as_protobuf_applies_it():
    a = ps_pb2.Update(worker="w", req_id=1, dense=[tensor_to_pb("x", np.ones(2))])
    b = ps_pb2.Update(req_id=2, dense=[tensor_to_pb("y", np.ones(3))])
    raw = length(3, a.SerializeToString()) + length(3, b.SerializeToString())
    req, payload = split_push(raw)
    got = ps_pb2.Update.FromString(bytes(payload))
    assert got == req.update and got.worker == "w" and got.req_id == 2 and len(got.dense) == 2
