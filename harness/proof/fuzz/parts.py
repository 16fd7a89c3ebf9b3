"""Hypothesis strategies for the pieces of hostile requests: tensors, rows, updates, unknown fields.

Each strategy returns a `Part`: the wire records, plus `bad` (why a correct server must refuse
the piece, whatever else the request holds) and `notes` (hostile but possibly legal features,
for the case's label). `bad` is kept conservative on purpose: the fuzzer reports an OK answer
that changed state for a `bad` case, so nothing legal may be called bad here.

The names below are the state the runner seeds before fuzzing (harness/proof/fuzz/runner.py), so
pushes can aim at parameters that exist, with their real shapes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from pschaos.harness.proof.fuzz.protowire import EGROUP, I32, I64, LEN, SGROUP, VARINT, Msg, varint

DENSE: dict[str, tuple[int, ...]] = {"fz/scalar": (), "fz/vec": (4,), "fz/mat": (3, 5)}
#: the largest parameter (64 KiB): pulled, never pushed (its gradients would make every case large)
BIG = ("fz/big", (128, 128))
#: the audit tensor of shard 0; the runner does NOT create it, so the first INITs of it (wrong
#: shapes, 4M elements, then the right one: harness/proof/fuzz/cases.SPECIALS) meet a shard without one
AUDIT = ("__audit__/0", (256,))
TABLE, DIM = "emb", 8
NEW_NAMES = ("fz/new0", "fz/new1", "fz/new2")          # INIT may create these; a PUSH may then find them
NEVER = ("fz/never", "fz/never/2")                     # never initialized: a PUSH of them must be refused
ODD_NAMES = ("n" * 300, "fz/\u00e9t\u00e9", "__audit__/7", "fz/ sp ace")
MAX_U64 = (1 << 64) - 1
MAX_I64 = (1 << 63) - 1


@dataclass(frozen=True)
class Part:
    msg: Msg
    bad: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __add__(self, other: "Part") -> "Part":
        return Part(self.msg + other.msg, self.bad + other.bad, self.notes + other.notes)


def rec(field: int, wt: int, value) -> Msg:
    return Msg(((field, wt, value),))


def floats(n: int, fill: str, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, n).astype("<f4")
    if n and fill in ("nan", "inf", "-inf", "big", "denormal"):
        a[rng.integers(0, n)] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "big": 3e38,
                                 "denormal": 1e-45}[fill]
    return a.tobytes()


def packed(values: list[int]) -> bytes:
    return b"".join(varint(v & MAX_U64 if v < 0 else v) for v in values)


# ---------------------------------------------------------------- unknown fields
BROKEN_WIRE = ("stray-end-group", "wire-type-6", "wire-type-7", "field-0", "overlong-varint")


LEGAL_WIRE = ("varint", "fixed64", "fixed32", "len", "group", "empty-group")


@st.composite
def unknown_field(draw, fields: tuple[int, ...], legal: bool = True) -> Part:
    """One record of a field number the schema does not have, of any legal wire type (groups
    too). With `legal=False` it may also be malformed (a stray end-group, wire types 6/7, field 0,
    an 11-byte varint): then the message does not parse, so structured requests take their broken
    records from `broken_wire` once per case (harness/proof/fuzz/cases.py) and parse otherwise."""
    f = draw(st.sampled_from(fields + ((1 << 29) - 1,)))
    return _wire_record(draw, f, draw(st.sampled_from(LEGAL_WIRE if legal else LEGAL_WIRE * 3 + BROKEN_WIRE)))


@st.composite
def broken_wire(draw, fields: tuple[int, ...]) -> Part:
    """One malformed record: the message holding it does not parse."""
    return _wire_record(draw, draw(st.sampled_from(fields + ((1 << 29) - 1,))), draw(st.sampled_from(BROKEN_WIRE)))


def _wire_record(draw, f: int, kind: str) -> Part:
    if kind == "varint":
        return Part(rec(f, VARINT, draw(st.sampled_from([0, 1, 300, MAX_U64]))), notes=(f"unknown {f}:varint",))
    if kind == "fixed64":
        return Part(rec(f, I64, draw(st.binary(min_size=8, max_size=8))), notes=(f"unknown {f}:fixed64",))
    if kind == "fixed32":
        return Part(rec(f, I32, draw(st.binary(min_size=4, max_size=4))), notes=(f"unknown {f}:fixed32",))
    if kind == "len":
        return Part(rec(f, LEN, draw(st.binary(max_size=24))), notes=(f"unknown {f}:len",))
    if kind in ("group", "empty-group"):
        inner = Msg() if kind == "empty-group" else rec(draw(st.integers(1, 30)), VARINT, draw(st.integers(0, 9)))
        return Part(rec(f, SGROUP, inner), notes=(f"unknown {f}:group",))
    if kind == "stray-end-group":
        return Part(rec(f, EGROUP, None), bad=("stray end-group",))
    if kind == "field-0":
        return Part(rec(0, VARINT, 1), bad=("field number 0",))
    if kind == "overlong-varint":
        return Part(rec(f, VARINT, 1 << 70), bad=("11-byte varint",))
    return Part(rec(f, 6 if kind == "wire-type-6" else 7, b"\x01"), bad=(kind,))


def unknowns(fields: tuple[int, ...], most: int = 2):
    """Up to `most` unknown fields, all of legal wire types (the message still parses)."""
    return st.lists(unknown_field(fields), max_size=most).map(lambda ps: sum(ps, Part(Msg())))


# ------------------------------------------------------------------- tensors
@st.composite
def tensor(draw, kind: str) -> Part:
    """A Tensor for an update of `kind` ("push", "init" or "other"), valid or hostile."""
    # INITs of the audit tensor come from cases.SPECIALS only (the wrong shapes first, while the
    # shard has none); a push of it is NOT_FOUND until then, an SGD count after
    names = {"push": [*DENSE, *DENSE, AUDIT[0], *NEW_NAMES, *NEVER, *ODD_NAMES, ""],
             "init": [*DENSE, *NEW_NAMES, *NEW_NAMES, *ODD_NAMES, ""]}.get(kind, [*DENSE, *NEVER, ""])
    name = draw(st.sampled_from(names))
    bad: list[str] = []
    notes: list[str] = [f"dense[{name[:20]!r}]"]
    known = dict(DENSE, **{AUDIT[0]: AUDIT[1]})
    if name == "":
        bad.append("empty name")
    if kind == "push" and name in NEVER:
        bad.append("push of an uninitialized name")
    shape_kind = draw(st.sampled_from(["right", "right", "right", "other", "huge", "negative", "many", "zero"]))
    if shape_kind == "right" or (shape_kind == "other" and name not in known):
        shape = list(known.get(name, draw(st.lists(st.integers(1, 4), max_size=3))))
    elif shape_kind == "other":
        shape = draw(st.sampled_from([[1], [4], [15], [5, 3], [1, 4], [256, 1]]))
        if list(shape) != list(known[name]) and kind == "push":
            bad.append("shape mismatch")
    elif shape_kind == "huge":
        shape = draw(st.sampled_from([[1 << 32, 1 << 32], [1 << 62, 4], [MAX_I64], [1 << 31, 1 << 31, 4]]))
        bad.append("huge shape")
    elif shape_kind == "negative":
        shape = draw(st.sampled_from([[-1], [2, -3], [-(1 << 63)], [-1, -1]]))
        bad.append("negative dim")
    elif shape_kind == "many":
        shape = [1] * draw(st.sampled_from([9, 33, 65, 100]))
        if len(shape) > 64:
            bad.append(f"{len(shape)} dims")
        elif kind == "push" and name in known:
            bad.append("shape mismatch")
    else:
        shape = draw(st.sampled_from([[0], [3, 0]]))
        if kind == "push" and name in known:
            bad.append("shape mismatch")
    notes.append(f"shape={shape if len(shape) < 5 else f'[1]*{len(shape)}'}")
    n = int(np.prod(shape, dtype=object)) if shape else 1
    fill = draw(st.sampled_from(["ok", "ok", "ok", "big", "denormal", "nan", "inf", "-inf"]))
    if shape_kind in ("huge", "negative"):
        data = draw(st.sampled_from([b"", b"\x00\x00\x80\x3f"]))
    else:
        data = floats(n, fill, draw(st.integers(0, 1 << 30)))
        if n and fill in ("nan", "inf", "-inf"):
            bad.append(fill)
        elif fill != "ok":
            notes.append(fill)
    cut = draw(st.sampled_from([0, 0, 0, 0, -4, -1, 1, 4, 1000]))
    if cut and shape_kind not in ("huge", "negative"):
        data = data[:cut] if cut < 0 else data + bytes(cut)
        bad.append(f"data {'short' if cut < 0 else 'long'} by {abs(cut)}")
    dtype = draw(st.sampled_from(["float32"] * 6 + ["float64", "int8", "", "FLOAT32", "float32\x00", "bfloat16"]))
    if dtype != "float32":
        bad.append(f"dtype={dtype!r}")
    unpacked = draw(st.booleans())          # repeated int64: packed or one record per dim, both legal
    shape_recs = (Msg(tuple((2, VARINT, d) for d in shape)) if unpacked
                  else rec(2, LEN, packed(shape)) if shape else Msg())
    msg = rec(1, LEN, name) + shape_recs + rec(3, LEN, dtype) + rec(4, LEN, data)
    return Part(msg, tuple(bad), tuple(notes)) + draw(unknowns((5, 9, 100), 1))


# ---------------------------------------------------------------------- rows
def ids_bytes(ids: list[int]) -> bytes:
    return np.asarray(ids, dtype="<i8").tobytes()


@st.composite
def rows(draw, pull: bool = False) -> Part:
    """Embedding rows: a push's gradients, or (pull=True) a pull's wanted ids."""
    from pschaos.harness.proof.fuzz.protowire import Big

    table = draw(st.sampled_from([TABLE] * 5 + ["nope", "", "EMB"]))
    bad = [] if table == TABLE else ["unknown table"]
    ids_kind = draw(st.sampled_from(["small"] * 12 + ["negative", "odd", "huge-ids"] * 2 + ["big-count"]))
    seed = draw(st.integers(0, 1 << 30))
    n = draw(st.integers(0, 6))
    ids: object = ids_bytes(draw(st.lists(st.integers(0, 200), min_size=n, max_size=n)))
    if ids_kind == "negative":
        neg = [-1, 3, -(1 << 63)][: max(n, 1)]
        ids, n = ids_bytes(neg), len(neg)
        bad.append("negative id")
    elif ids_kind == "odd":
        ids = ids + draw(st.binary(min_size=1, max_size=7))
        bad.append("ids not a multiple of 8 bytes")
    elif ids_kind == "huge-ids":
        big = [MAX_I64, 1 << 40, 0][: max(n, 1)]
        ids, n = ids_bytes(big), len(big)
    elif ids_kind == "big-count":
        n = 200_000 if pull else 70_000
        neg = draw(st.booleans())
        ids = Big("ids", n, seed, neg=neg)
        if neg:
            bad.append("negative id")
    notes = [f"rows[{table}] {ids_kind} n={n}"]
    dim = draw(st.sampled_from([DIM] * 5 + [0, 7, -1, (1 << 31) - 1]))
    if dim != DIM and not pull:
        bad.append(f"dim={dim}")
    if pull:
        data = draw(st.sampled_from([b"", b"junk"]))
    elif ids_kind == "big-count":
        data = Big("rows", n * DIM, seed + 1)
    else:
        fill = draw(st.sampled_from(["ok", "ok", "ok", "nan", "inf", "big"]))
        data = floats(n * DIM, fill, seed)
        if n and fill in ("nan", "inf"):
            bad.append(fill)
        cut = draw(st.sampled_from([0, 0, 0, -4, 4]))
        if cut:
            data = data[:cut] if cut < 0 else data + bytes(cut)
            bad.append("data length mismatch")
    msg = rec(1, LEN, table) + rec(2, LEN, ids) + rec(3, VARINT, dim) + rec(4, LEN, data)
    return Part(msg, tuple(bad), tuple(notes))
