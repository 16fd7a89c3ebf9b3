"""Hypothesis strategies for hostile ReplicateRequests: forged senders, epochs, entries, state.

The fuzzer sends these with the peer token too (harness/proof/fuzz/cases.metadata), so the handler
itself is under test, not only the token check. Out of scope, by decision: a holder of the tokens
who names the real current primary at the current epoch and sends well-formed, applicable data
is indistinguishable from that primary (the tokens are the whole of the cluster's
authentication), so it is never generated.

So there are two kinds of Replicate. Most name the true primary (the one etcd names) at the
current epoch and go to a replica: they pass the sender checks, and their content is drawn from
`invalid_content` only (a first applicable entry whose payload is malformed or must be refused,
or whose epoch is outside [the copy's last epoch, the sender's epoch]; a gap or stale seqs; a
state blob that must not load), so the handler's content checks are what answers. The rest are
forged: another node, a made-up name, the target copy itself (at the current epoch too), or an
epoch other than the record's; any content, valid entries included, and `bad` says why a
correct copy refuses them whatever they carry (harness/proof/fuzz/cases marks them must_refuse).
"""
from __future__ import annotations

import json
import struct
from functools import lru_cache

import numpy as np
from hypothesis import strategies as st

from pschaos.psnodes.store.blob import pack, unpack

from pschaos.harness.proof.fuzz.messages import bad_update, update, valid_update
from pschaos.harness.proof.fuzz.parts import MAX_U64, Part, rec, unknowns
from pschaos.harness.proof.fuzz.protowire import LEN, VARINT, Msg, Sym

FAKE_NAMES = ("shard-0/9", "", "shard-1/0", "x" * 300, "zz-fuzzer-node")
WHO = ("primary", "other", "target", *(f"fake:{n}" for n in FAKE_NAMES))
EPOCHS = {"current": Sym("epoch"), "+1": Sym("epoch", 1), "+2": Sym("epoch", 2), "-1": Sym("epoch", -1),
          "0": 0, "max": MAX_U64}

#: bytes that no protobuf parser reads as an Update
MALFORMED = (b"\x08", b"\x12\x05ab", b"\x12\x02\xff\xfe", b"\x00\x01", b"\x0c", b"\x2a\x03\x0a\x05a", b"\x0f",
             b"\x08" + b"\xff" * 10 + b"\x01", b"\x2a\x80\x80\x80\x80\x10")


@lru_cache(maxsize=1)
def empty_state() -> tuple[dict, dict]:
    """meta and arrays of a full snapshot of an empty shard 0 (tables {"emb": 8}, adam): the
    template of valid-looking blobs."""
    from pschaos.psnodes.store.optimizers import OptimizerConfig
    from pschaos.psnodes.store.state import ShardSpec
    from pschaos.psnodes.store.store import ShardStore

    blob, _ = ShardStore(ShardSpec(shard=0, num_shards=1, tables={"emb": 8},
                                   optimizer=OptimizerConfig("adam", 0.01))).export_state(0)
    meta, arrays = unpack(blob)
    return meta, {k: v.copy() for k, v in arrays.items()}


def _blob_with(meta_edit: dict | None = None, drop: str | None = None, arrays: dict | None = None) -> bytes:
    meta, arr = empty_state()
    meta = {k: v for k, v in meta.items() if k != drop}
    meta.update(meta_edit or {})
    return pack(meta, arr if arrays is None else arrays)


def _raw_blob(head: bytes, tail: bytes = b"") -> bytes:
    return b"PSB1" + struct.pack("<I", len(head)) + head + tail


def _nested(depth: int, obj: bool) -> bytes:
    """A JSON text nested `depth` deep: what a recursive parser cannot hold."""
    return (b'{"a":' * depth + b"1" + b"}" * depth) if obj else (b"[" * depth + b"]" * depth)


def _dense_blob(fill: str) -> bytes:
    """A full snapshot of an empty shard plus one dense parameter (fz/vec) whose values are NaN
    or Inf, or stored as float64: no correct copy loads it."""
    from pschaos.psnodes.store.optimizers import OptimizerConfig

    meta, arr = empty_state()
    meta = {**meta, "seq": 1, "seq_epoch": 1, "epochs": [[1, 1]], "dense": ["fz/vec"],
            "dense_steps": {"fz/vec": 0}, "dense_mod": {"fz/vec": 1}}
    value = np.full(4, 0.5, "<f8" if fill == "float64" else "<f4")
    if fill != "float64":
        value[1] = {"nan": np.nan, "inf": np.inf}[fill]
    arrays = {**arr, "d/fz/vec": value}
    for k in OptimizerConfig("adam", 0.01).slot_names():
        arrays[f"ds/{k}/fz/vec"] = np.zeros(4, "<f4")
    return pack(meta, arrays)


BLOB_KINDS = ("garbage", "truncated", "bad-magic", "head-len", "not-json", "json-list", "meta-only-shard-full",
              "missing-key", "wrong-shard", "dense-no-array", "delta-base", "seq-type", "offset-past-end",
              "nested-json", "nan-dense", "inf-dense", "float64-dense", "extra-array")


@st.composite
def bad_blob(draw) -> tuple[bytes, str]:
    """A state blob that must not load, and what is wrong with it."""
    meta, _ = empty_state()
    kind = draw(st.sampled_from(BLOB_KINDS))
    if kind == "garbage":
        return b"\x00" + draw(st.binary(max_size=64)), kind
    if kind == "truncated":
        full = _blob_with()
        return full[: draw(st.integers(0, len(full) - 1))], kind
    if kind == "bad-magic":
        return b"PSB2" + _blob_with()[4:], kind
    if kind == "head-len":
        return b"PSB1" + struct.pack("<I", draw(st.sampled_from([1 << 31, 0xFFFFFFFF, 10 ** 6]))) + b"{}", kind
    if kind == "not-json":
        return _raw_blob(b"{not json"), kind
    if kind == "json-list":
        return _raw_blob(b"[]"), kind
    if kind == "nested-json":
        depth = draw(st.sampled_from([2000, 200_000]))
        return _raw_blob(_nested(depth, draw(st.booleans()))), f"header nested {depth} deep"
    if kind == "meta-only-shard-full":
        return pack({"shard": 0, "full": True}, {}), kind
    if kind == "missing-key":
        key = draw(st.sampled_from(sorted(meta)))
        return _blob_with(drop=key), f"missing meta.{key}"
    if kind == "wrong-shard":
        return _blob_with({"shard": draw(st.sampled_from([1, -1, "0", None]))}), kind
    if kind == "dense-no-array":
        return _blob_with({"dense": ["fz/vec"], "dense_steps": {"fz/vec": 1}, "dense_mod": {"fz/vec": 1}}), kind
    if kind == "delta-base":
        return _blob_with({"full": False, "base_seq": 1 << 40}), kind
    if kind == "seq-type":
        return _blob_with({"seq": draw(st.sampled_from([-5, "x", None]))}), kind
    if kind in ("nan-dense", "inf-dense", "float64-dense"):
        return _dense_blob(kind.split("-")[0]), kind
    if kind == "extra-array":
        _, arr = empty_state()
        return _blob_with(arrays={**arr, "x/evil": np.zeros(3, "<f4")}), kind
    head = json.dumps({"meta": meta, "arrays": [["d/fz/vec", "<f4", [4], 1 << 30, 16]]}).encode()
    return _raw_blob(head), kind


def entry(seq, epoch, payload) -> Msg:
    return rec(1, VARINT, seq) + rec(2, VARINT, epoch) + rec(3, LEN, payload)


DEFECTS = ("bad-entry", "bad-entry", "gap", "stale", "blob", "blob", "future-epoch", "past-epoch")


@st.composite
def invalid_content(draw, defect: str | None = None) -> Part:
    """Entries and state that no correct replica applies: no entry at seq+1 that it could apply,
    and at least one defect (a malformed first entry, one from an epoch after the sender's or
    before the copy's last, a gap, stale seqs, a bad blob)."""
    defect = defect or draw(st.sampled_from(DEFECTS))
    p = Part(Msg())
    epoch = draw(st.sampled_from([Sym("epoch"), Sym("epoch"), 0, MAX_U64]))
    if defect == "blob":
        raw, why = draw(bad_blob())
        p += Part(rec(8, LEN, raw), (), (f"state {why}",))
    if defect == "bad-entry":
        if draw(st.booleans()):
            payload, why = draw(st.sampled_from(MALFORMED)), "malformed payload"
        else:
            u = draw(bad_update())
            payload, why = u.msg, f"payload {'; '.join(u.bad)[:40]}"
        p += Part(rec(4, LEN, entry(Sym("seq", 1), epoch, payload)), (), (why,))
    elif defect in ("future-epoch", "past-epoch"):
        # a payload the copy could apply, at an epoch no entry at seq+1 can have: after the
        # sender's own, or before the copy's last entry's (epochs never go back in a log)
        bad_epoch = draw(st.sampled_from([Sym("epoch", 1), MAX_U64])) if defect == "future-epoch" \
            else Sym("seq_epoch", -1)
        p += Part(rec(4, LEN, entry(Sym("seq", 1), bad_epoch, draw(valid_update()).msg)), (), (defect,))
    elif defect == "gap":
        first = draw(st.sampled_from([Sym("seq", 2), Sym("seq", 3), Sym("seq", 1000), MAX_U64]))
        p += Part(rec(4, LEN, entry(first, epoch, draw(update()).msg)), (), ("gap",))
    elif defect == "stale":
        for off in draw(st.lists(st.sampled_from([0, -1, -2]), min_size=1, max_size=3)):
            p += Part(rec(4, LEN, entry(Sym("seq", off), epoch, draw(update()).msg)), (), ("stale seq",))
    # later entries: only past the first gap (seq+2 and on), so a replica that stopped, skipped or
    # refused the defect still has nothing it could apply
    for off in draw(st.lists(st.sampled_from([2, 3, 4]), max_size=2)):
        p += Part(rec(4, LEN, entry(Sym("seq", off), epoch, draw(update()).msg)))
    return p


@st.composite
def any_content(draw) -> Part:
    """What a forged sender may send: invalid content, valid entries in order, a full
    snapshot of an empty shard (which would wipe a replica that takes it), or a bare heartbeat."""
    kind = draw(st.sampled_from(["invalid", "entries", "entries", "empty-snapshot", "heartbeat"]))
    if kind == "invalid":
        return draw(invalid_content())
    if kind == "heartbeat":
        return Part(Msg(), (), ("heartbeat",))
    if kind == "empty-snapshot":
        return Part(rec(8, LEN, _blob_with()), (), ("empty full snapshot",))
    p = Part(Msg(), (), ("valid entries",))
    epoch = draw(st.sampled_from([Sym("epoch"), Sym("epoch", 1), 0]))
    for i in range(draw(st.integers(1, 3))):
        p += Part(rec(4, LEN, entry(Sym("seq", i + 1), epoch, draw(valid_update()).msg)))
    return p


def forged(who: str, e: str, target: str) -> str:
    """Why a correct copy refuses a Replicate from `who` at epoch `e` sent to `target` ("primary",
    "replica" or "replica2"), whatever it carries ('' for the true primary at the current epoch,
    to a replica: then only its content can be refused)."""
    if who == "target" or (who == "primary" and target == "primary"):
        return f"forged sender: names the target copy itself (epoch {e})"
    if who != "primary":
        return f"forged sender: {who[:24]} is not the primary (epoch {e})"
    if e != "current":
        return f"forged sender: the primary at epoch {e}, not the record's"
    return ""


def _tail(draw) -> Part:
    p = Part(Msg())
    for field, choices in ((5, [Sym("seq"), Sym("seq", 5), MAX_U64]), (6, [0, Sym("seq"), MAX_U64]),
                           (9, [Sym("epoch"), Sym("epoch", 1), MAX_U64])):
        v = draw(st.sampled_from([None, *choices]))
        if v is not None:
            p += Part(rec(field, VARINT, v))
    return p + draw(unknowns((7, 10, 100)))


def _sender(who: str):
    return Sym(who) if not who.startswith("fake:") else who[5:]


@st.composite
def replicate_request(draw, target: str = "replica", who: str | None = None) -> Part:
    """A ReplicateRequest to `target`: mostly from the true primary at the current epoch with
    invalid content (the content checks answer), else from a forged sender with any content
    (`bad` says why it must be refused). `who` fixes the sender (mutation bases use a name no
    byte edit turns into a real node's)."""
    if who is None and target != "primary" and draw(st.integers(0, 4)) < 4:
        who, e = "primary", "current"
    else:
        who = who or draw(st.sampled_from(WHO))
        e = draw(st.sampled_from(list(EPOCHS)))
    why = forged(who, e, target)
    content = draw(invalid_content() if not why else any_content())
    p = Part(Msg(), (why,) if why else (), (f"from {who[:16]} at epoch {e}",))
    shard = draw(st.sampled_from([None] * 6 + [0] * 5 + [1]))
    if shard is not None:
        p += Part(rec(1, VARINT, shard), (f"shard={shard}",) if shard else ())
    p += Part(rec(2, VARINT, EPOCHS[e]) + rec(3, LEN, _sender(who))) + content
    return p + _tail(draw)


# ------------------------------------------------------------------ specials
@st.composite
def self_named_request(draw) -> Part:
    """To a replica, naming that very replica as the primary at the current epoch, with content
    it could apply (valid entries, an empty snapshot) or none: refused whatever it carries."""
    p = Part(Msg(), ("forged sender: names the target copy itself (epoch current)",),
             ("self-named at the current epoch",))
    p += Part(rec(2, VARINT, Sym("epoch")) + rec(3, LEN, Sym("target"))) + draw(any_content())
    return p + _tail(draw)


@st.composite
def nested_blob_request(draw) -> Part:
    """From the true primary at the current epoch: a state blob whose JSON header nests 200,000
    deep (a recursive parser overflows its stack). Must be refused naming the state."""
    obj = draw(st.booleans())
    p = Part(Msg(), (), (f"true primary, state header nested 200000 deep ({'objects' if obj else 'lists'})",))
    blob = _raw_blob(_nested(200_000, obj))
    p += Part(rec(2, VARINT, Sym("epoch")) + rec(3, LEN, Sym("primary")) + rec(8, LEN, blob))
    return p + _tail(draw)


LONG = 20 * 1024


@st.composite
def long_primary_request(draw) -> Part:
    """A sender name of 20 KiB: refused, and the answer names the field (not 'Stream removed')."""
    name = draw(st.sampled_from(["s" * LONG, "shard-0/" + "1" * LONG, "\u00e9" * (LONG // 2)]))
    e = draw(st.sampled_from(["current", "+1"]))
    p = Part(Msg(), ("forged sender: a 20 KiB name",), (f"primary of {len(name.encode())} bytes at epoch {e}",))
    p += Part(rec(2, VARINT, EPOCHS[e]) + rec(3, LEN, name)) + draw(any_content())
    return p + _tail(draw)
