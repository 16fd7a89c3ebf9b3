"""A tiny protobuf wire encoder for hostile requests, with placeholders filled in at send time.

The generated classes cannot say what a hostile client says: a field repeated where the schema
has one, an unknown field of any wire type, a group, a negative enum, a varint of 11 bytes. So
fuzz cases are plain data (`Msg` of `(field, wire type, value)` records) and are encoded here.

Cases are generated before the cluster is known (one seed, one sequence, no cluster needed), but
some values only exist at send time: the current epoch, the primary's name, the target copy's
seq, the cluster token. Those are `Sym` placeholders, resolved by `render` against a `Ctx`.
Large payloads (200k embedding ids, a megabyte of echo) are `Big` specs, expanded at send time
from their own seed, so a list of 10,000 generated cases stays small.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Union

import numpy as np

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class Sym:
    """A value known only at send time: `epoch`, `seq`, `seq_epoch` (ints, plus `offset`),
    `primary`, `target`, `other` (node names), `token`."""

    name: str
    offset: int = 0


@dataclass(frozen=True)
class Big:
    """A large payload made at send time: `ids` (n int64 ids), `rows` (n float32 values),
    `bytes` (n random bytes), `zeros` (n zero bytes); `neg` puts one negative id among the ids."""

    kind: str
    n: int
    seed: int
    neg: bool = False


@dataclass(frozen=True)
class Msg:
    """A message as wire records, in the order they are written (repeats and unknowns allowed)."""

    fields: tuple = ()

    def __add__(self, other: "Msg") -> "Msg":
        return Msg(self.fields + other.fields)


@dataclass(frozen=True)
class Mutated:
    """A message's encoding, then byte edits: ("trunc"|"flip"|"insert"|"delete", where 0..1, byte)."""

    base: Msg
    edits: tuple = ()


Value = Union[int, bytes, str, Sym, Big, Msg, None]
Body = Union[bytes, Msg, Mutated, Big]


@dataclass(frozen=True)
class Ctx:
    """What placeholders resolve to for one call."""

    epoch: int
    primary: str
    target: str
    other: str
    seq: int
    seq_epoch: int
    token: str


def varint(n: int) -> bytes:
    """Any non-negative int, even one wider than 64 bits (a hostile over-long varint)."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field: int, wt: int) -> bytes:
    return varint((field << 3) | wt)


def resolve(v: Value, ctx: Ctx):
    if isinstance(v, Sym):
        if v.name in ("primary", "target", "other"):
            return getattr(ctx, v.name)
        if v.name == "token":
            return ctx.token
        return getattr(ctx, v.name) + v.offset
    if isinstance(v, Big):
        return expand(v)
    return v


def expand(b: Big) -> bytes:
    rng = np.random.default_rng(b.seed)
    if b.kind == "ids":
        ids = rng.integers(0, 1 << 40, size=b.n, dtype=np.int64)
        if b.neg and b.n:
            ids[b.n // 2] = -1 - int(rng.integers(0, 1 << 20))
        return ids.astype("<i8").tobytes()
    if b.kind == "rows":
        return rng.standard_normal(b.n).astype("<f4").tobytes()
    if b.kind == "zeros":
        return bytes(b.n)
    return rng.integers(0, 256, size=b.n, dtype=np.uint8).tobytes()


def encode(msg: Msg, ctx: Ctx) -> bytes:
    out = bytearray()
    for field, wt, v in msg.fields:
        v = resolve(v, ctx)
        if wt == VARINT:
            out += key(field, wt) + varint(v & MASK64 if v < 0 else v)
        elif wt == I64:
            out += key(field, wt) + (v if isinstance(v, bytes) else struct.pack("<Q", v & MASK64))
        elif wt == I32:
            out += key(field, wt) + (v if isinstance(v, bytes) else struct.pack("<I", v & 0xFFFFFFFF))
        elif wt == LEN:
            data = encode(v, ctx) if isinstance(v, Msg) else v.encode() if isinstance(v, str) else v
            out += key(field, wt) + varint(len(data)) + data
        elif wt == SGROUP:       # a whole group: start, its records, end
            out += key(field, SGROUP) + (encode(v, ctx) if v is not None else b"") + key(field, EGROUP)
        elif wt == EGROUP:       # a stray end-group marker
            out += key(field, EGROUP)
        else:                    # wire types 6 and 7 do not exist: a raw key, then the value's bytes
            out += key(field, wt) + (v or b"")
    return bytes(out)


def mutate(raw: bytes, edits: tuple) -> bytes:
    b = bytearray(raw)
    for op, where, byte in edits:
        pos = min(int(where * len(b)), max(len(b) - 1, 0))
        if op == "trunc":
            del b[pos:]
        elif op == "flip" and b:
            b[pos] ^= byte or 1
        elif op == "insert":
            b[pos:pos] = bytes([byte])
        elif op == "delete" and b:
            del b[pos]
    return bytes(b)


def render(body: Body, ctx: Ctx) -> bytes:
    """The request bytes of a case body for this call."""
    if isinstance(body, bytes):
        return body
    if isinstance(body, Big):
        return expand(body)
    if isinstance(body, Mutated):
        return mutate(encode(body.base, ctx), body.edits)
    return encode(body, ctx)
