"""The fuzzer's cases without a cluster: one seed gives one sequence, the wire encoder agrees with
protobuf, bad tokens never carry the token, and no forged Replicate could be told apart from
the real primary's (harness/fuzz/replicate.py: out of scope, never generated)."""
from dataclasses import replace

import numpy as np
import pytest
from google.protobuf.message import DecodeError

from harness.fuzz.cases import BAD_AUTH, PEER_AUTH, PEER_HEADER, generate, metadata, refused_by_auth
from harness.fuzz.protowire import I32, I64, LEN, SGROUP, VARINT, Ctx, Msg, encode, render
from harness.fuzz.replicate import empty_state
from psnodes.blob import pack, unpack
from psnodes.channels import TOKEN_HEADER
from psnodes.proto import ps_pb2

CTX = Ctx(epoch=3, primary="shard-0/0", target="shard-0/1", other="shard-0/2", seq=12, seq_epoch=3,
          token="0123456789abcdef0123456789abcdef")


def sequence(seed: int, n: int) -> list[tuple]:
    return [(c.method, c.target, c.auth, c.label, c.must_refuse, c.deadline, c.parallel, render(c.body, CTX))
            for c in generate(seed, n)]


def test_same_seed_same_requests_other_seed_others():
    a = sequence(7, 250)
    assert len(a) == 250 and a == sequence(7, 250)
    assert a != sequence(8, 250)
    assert {x[0] for x in a} == {"Push", "Pull", "Replicate", "Snapshot", "Status", "Echo"}


def test_a_longer_run_starts_with_the_shorter_one():
    assert sequence(5, 300)[:100] == sequence(5, 100)


def test_encoder_matches_protobuf_and_writes_what_protobuf_cannot():
    upd = Msg(((1, VARINT, 1), (2, LEN, "w"), (3, VARINT, 1 << 63), (4, VARINT, -1),
               (5, LEN, Msg(((1, LEN, "x"), (2, LEN, b"\x02\x03"), (3, LEN, "float32"), (4, LEN, bytes(24)))))))
    got = ps_pb2.Update.FromString(encode(upd, CTX))
    assert (got.kind, got.worker, got.req_id, got.clock) == (1, "w", 1 << 63, -1)
    assert list(got.dense[0].shape) == [2, 3]
    unknown = Msg(((99, I64, 5), (98, I32, 6), (97, LEN, b"zz"), (96, SGROUP, Msg(((1, VARINT, 1),)))))
    with_unknown = ps_pb2.Update.FromString(encode(upd + unknown, CTX))      # unknown fields are legal
    with_unknown.DiscardUnknownFields()
    assert with_unknown == got
    twice = Msg(((3, LEN, Msg(((2, LEN, "a"),))), (3, LEN, Msg(((3, VARINT, 9),)))))
    merged = ps_pb2.PushRequest.FromString(encode(twice, CTX)).update
    assert (merged.worker, merged.req_id) == ("a", 9)                           # protobuf merges them


@pytest.mark.parametrize("auth", BAD_AUTH)
def test_bad_auth_never_carries_the_token(auth):
    for peer in ("", "peer-secret"):
        md = metadata(auth, CTX.token, peer)
        assert (TOKEN_HEADER, CTX.token) not in md
        assert all(k == k.lower() for k, _ in md)
        assert refused_by_auth(auth, "Push", peer) and refused_by_auth(auth, "Replicate", peer)


@pytest.mark.parametrize("auth", PEER_AUTH)
def test_without_the_peer_token_only_replicate_is_refused(auth):
    md = metadata(auth, CTX.token, "peer-secret")
    assert (TOKEN_HEADER, CTX.token) in md and (PEER_HEADER, "peer-secret") not in md
    assert refused_by_auth(auth, "Replicate", "peer-secret")
    assert not refused_by_auth(auth, "Replicate", "") and not refused_by_auth(auth, "Push", "peer-secret")


def test_a_replicate_carries_the_peer_token_when_there_is_one():
    assert metadata("ok", CTX.token, "peer-secret") == ((TOKEN_HEADER, CTX.token), (PEER_HEADER, "peer-secret"))
    assert metadata("ok", CTX.token) == ((TOKEN_HEADER, CTX.token),)


def _defective(upd: ps_pb2.Update) -> bool:
    """What bad_update appends: a kind that does not exist, a NaN, a float64 or negative-dim
    tensor, rows of an unknown table."""
    if upd.kind not in (0, 1) or any(r.table == "nope" for r in upd.sparse):
        return True
    for t in upd.dense:
        if t.dtype != "float32" or any(d < 0 for d in t.shape):
            return True
        if len(t.data) % 4 == 0 and not np.isfinite(np.frombuffer(t.data, "<f4")).all():
            return True
    return False


def _state_is_bad(state: bytes) -> bool:
    try:
        meta, arrays = unpack(state)
    except Exception:  # noqa: BLE001 - any failure to load is what we want
        return True
    good, good_arrays = empty_state()
    return meta != good or set(arrays) != set(good_arrays)


def test_no_forged_replicate_is_indistinguishable_from_the_primary():
    """Every Replicate that names the real primary at the current epoch carries nothing a correct
    replica could take: no parseable, defect-free entry at seq+1, no loadable state."""
    checked = 0
    for c in generate(11, 750):
        if c.method != "Replicate":
            continue
        for target in (CTX.primary, CTX.target):
            ctx = replace(CTX, target=target)
            try:
                req = ps_pb2.ReplicateRequest.FromString(render(c.body, ctx))
            except DecodeError:
                continue
            if (req.primary, req.epoch) != (ctx.primary, ctx.epoch):
                continue
            checked += 1
            assert not req.state or _state_is_bad(req.state), c.label
            for e in req.entries:
                if e.seq == ctx.seq + 1:
                    try:
                        upd = ps_pb2.Update.FromString(e.payload)
                    except DecodeError:
                        continue
                    assert _defective(upd), c.label
            assert req.state or req.entries, c.label
    assert checked >= 20


def test_the_valid_looking_blob_template_loads():
    meta, arrays = empty_state()
    assert unpack(pack(meta, arrays))[0] == meta and meta["full"] and meta["shard"] == 0
