"""Hypothesis strategies for whole Update, PushRequest and PullRequest messages.

Field numbers follow psnodes/proto/ps.proto; everything is wire records (harness/proof/fuzz/protowire),
so a message may repeat a singular field, carry unknown fields, or name an enum value the schema
does not have.
"""
from __future__ import annotations

from hypothesis import strategies as st

from pschaos.harness.proof.fuzz.parts import (AUDIT, BIG, DENSE, MAX_I64, MAX_U64, NEVER, Part, floats, ids_bytes, packed, rec, rows,
                    tensor, unknown_field, unknowns)
from pschaos.harness.proof.fuzz.protowire import LEN, VARINT, Msg, Sym

BAD_KINDS = (2, 7, (1 << 31) - 1, -1, -(1 << 31))
INVALID_UTF8 = b"\xff\xfe"
WORKERS = ("fz-w", "worker-0", "worker-255", "", "w" * 300, "\u00e9", INVALID_UTF8)


def _worker(worker, kind: str) -> Part:
    bad: tuple[str, ...] = ()
    if worker == INVALID_UTF8:
        bad = ("worker is not UTF-8",)
    elif worker == "" and kind == "push":
        bad = ("empty worker",)
    return Part(rec(2, LEN, worker), bad, (f"worker={worker[:12]!r}",) if worker != "fz-w" else ())


@st.composite
def update(draw) -> Part:
    """An Update, valid or hostile: unknown kinds, bad tensors and rows, duplicate names,
    empty or odd workers, extreme ids and clocks, unknown fields, any field order."""
    kind = draw(st.sampled_from(["push"] * 6 + ["init"] * 2 + ["bad"]))
    if kind == "push":
        p = Part(rec(1, VARINT, 0) if draw(st.booleans()) else Msg())
    elif kind == "init":
        p = Part(rec(1, VARINT, 1), notes=("INIT",))
    else:
        k = draw(st.sampled_from(BAD_KINDS))
        p = Part(rec(1, VARINT, k), bad=(f"kind={k}",))
    # mostly plain names: a worker that is not UTF-8 makes the whole request unparseable
    worker = draw(st.sampled_from(("fz-w",) * 8 + ("worker-0",) * 4 + WORKERS + (("",) * 4 if kind == "init" else ())))
    if worker or draw(st.booleans()):
        p += _worker(worker, kind)
    elif kind == "push":
        p += Part(Msg(), bad=("empty worker",))
    p += Part(rec(3, VARINT, draw(st.one_of(st.integers(0, 40), st.sampled_from([MAX_U64, 1 << 63])))))
    p += Part(rec(4, VARINT, draw(st.sampled_from([-1, -1, 0, 1, MAX_I64, -(1 << 63)]))))
    p += Part(rec(7, VARINT, draw(st.one_of(st.integers(0, 3), st.just(MAX_U64)))))
    tensors = draw(st.lists(tensor("push" if kind == "push" else "init" if kind == "init" else "other"),
                            max_size=3))
    for t in tensors:
        p += Part(rec(5, LEN, t.msg), t.bad, t.notes)
    if tensors and draw(st.integers(0, 9)) == 0:
        p += Part(rec(5, LEN, tensors[0].msg), ("duplicate name",), ("duplicate",))
    for r in draw(st.lists(rows(), max_size=2 if kind != "init" else 1)):
        p += Part(rec(6, LEN, r.msg), r.bad + (("rows in INIT",) if kind == "init" else ()), r.notes)
    p += draw(unknowns((8, 9, 15, 16, 100, 2047)))
    if draw(st.booleans()):
        p = Part(Msg(tuple(reversed(p.msg.fields))), p.bad, p.notes + ("reversed",))
    return p


@st.composite
def valid_update(draw) -> Part:
    """A PUSH that a correct server applies: existing names, right shapes, small finite values."""
    p = Part(rec(2, LEN, "fz-r") + rec(3, VARINT, draw(st.integers(1, 1 << 40))) + rec(7, VARINT, 1))
    for name in draw(st.lists(st.sampled_from(sorted(DENSE)), min_size=1, max_size=3, unique=True)):
        shape = DENSE[name]
        n = 1
        for d in shape:
            n *= d
        t = rec(1, LEN, name) + (rec(2, LEN, packed(list(shape))) if shape else Msg()) + \
            rec(3, LEN, "float32") + rec(4, LEN, floats(n, "ok", draw(st.integers(0, 1 << 30))))
        p += Part(rec(5, LEN, t))
    return Part(p.msg, (), ("valid update",))


@st.composite
def legit_update(draw) -> Part:
    """A PUSH a correct server may accept, with legal oddities: rows, odd but valid workers,
    reused request ids (retries), clocks, unknown fields of every legal wire type, any order."""
    p = draw(valid_update())
    p += Part(rec(2, LEN, draw(st.sampled_from(["fz-w", "worker-0", "w" * 300, "\u00e9"]))))
    p += Part(rec(3, VARINT, draw(st.integers(0, 8))) + rec(4, VARINT, draw(st.sampled_from([-1, 0, 7]))))
    if draw(st.booleans()):
        n = draw(st.integers(1, 4))
        ids = draw(st.lists(st.integers(0, 300), min_size=n, max_size=n))
        r = rec(1, LEN, "emb") + rec(2, LEN, ids_bytes(ids)) + rec(3, VARINT, 8) + \
            rec(4, LEN, floats(n * 8, draw(st.sampled_from(["ok", "ok", "denormal"])), draw(st.integers(0, 99))))
        p += Part(rec(6, LEN, r), (), (f"rows n={n}",))
    for f in draw(st.lists(st.sampled_from([8, 9, 16, 2047]), max_size=2)):
        p += draw(unknown_field((f,)))
    if draw(st.booleans()):
        p = Part(Msg(tuple(reversed(p.msg.fields))), p.bad, p.notes + ("reversed",))
    return p


@st.composite
def bad_update(draw) -> Part:
    """An Update that a correct server must refuse, whatever else it holds: a defect appended
    last, where a later singular field or an extra repeated element always counts."""
    base = draw(update())
    defect = draw(st.sampled_from(["kind", "nan", "dtype", "negative-dim", "unknown-table"]))
    if defect == "kind":
        k = draw(st.sampled_from(BAD_KINDS))
        return base + Part(rec(1, VARINT, k), (f"kind={k}",))
    if defect == "unknown-table":
        r = rec(1, LEN, "nope") + rec(2, LEN, b"\x01" + bytes(7)) + rec(3, VARINT, 8) + rec(4, LEN, bytes(32))
        return base + Part(rec(6, LEN, r), ("unknown table",))
    name = draw(st.sampled_from(sorted(DENSE)))
    shape = list(DENSE[name]) if defect != "negative-dim" else [-1]
    n = 1
    for d in DENSE[name]:
        n *= d
    t = rec(1, LEN, name) + (rec(2, LEN, packed(shape)) if shape else Msg()) + \
        rec(3, LEN, "float64" if defect == "dtype" else "float32") + \
        rec(4, LEN, floats(n, "nan" if defect == "nan" else "ok", 7))
    return base + Part(rec(5, LEN, t), (defect,))


EPOCHS = {"none": None, "current": Sym("epoch"), "now": Sym("epoch"), "older": Sym("epoch", -1),
          "newer": Sym("epoch", 1), "max": MAX_U64}
WRONG_SHARDS = (1, -1, (1 << 31) - 1)


def _shard_epoch(draw, clean: bool = False) -> Part:
    """Shard and client epoch; `clean` keeps both acceptable (so the request's content decides),
    else one of them (or both) is one the node turns away before it reads the content."""
    p = Part(Msg())
    if clean:
        shard, e = draw(st.sampled_from([None, None, 0])), draw(st.sampled_from(["none", "current", "older"]))
    else:
        shard, e = draw(st.sampled_from([None, 0, *WRONG_SHARDS])), draw(st.sampled_from(list(EPOCHS)))
    if shard is not None:
        p += Part(rec(1, VARINT, shard), (f"shard={shard}",) if shard else ())
    if EPOCHS[e] is not None:
        p += Part(rec(2, VARINT, EPOCHS[e]), (f"client epoch {e}",) if e in ("newer", "max") else (),
                  (f"epoch {e}",))
    return p


def _clean(draw) -> bool:
    """Most envelopes are acceptable, so the content is what the node judges."""
    return draw(st.integers(0, 7)) != 0


@st.composite
def push_request(draw) -> Part:
    """A PushRequest: its update once (mostly), missing, or twice (two field-3 records, which a
    protobuf parser merges), around hostile shard and epoch values and unknown fields."""
    p = _shard_epoch(draw, _clean(draw))
    times = draw(st.sampled_from([1] * 10 + [0, 2]))
    pick = [update(), update(), legit_update(), legit_update(), bad_update()]
    ups = [draw(draw(st.sampled_from(pick))) for _ in range(times)]
    if times == 0:
        p += Part(Msg(), ("no update",))
    for u in ups:
        # merged twice, a later singular field overrides an earlier one: nothing is surely bad then
        p += Part(rec(3, LEN, u.msg), u.bad if times == 1 else (), u.notes)
    if times == 2:
        p += Part(Msg(), (), ("update twice",))
    for _ in range(draw(st.integers(0, 2))):
        p += draw(unknown_field((4, 5, 15, 100)))
    return p


PULL_NAMES = (*DENSE, *DENSE, BIG[0], AUDIT[0], *NEVER, "", "n" * 300)


@st.composite
def pull_request(draw) -> tuple[Part, float]:
    """A PullRequest and the deadline to send it with (short when it asks to wait for a clock)."""
    p = _shard_epoch(draw, _clean(draw))
    since = draw(st.sampled_from([None, None, 0, Sym("seq"), Sym("seq", 1), Sym("seq", -3), MAX_U64]))
    if since is not None:
        p += Part(rec(3, VARINT, since), (), ("since",))
    for name in draw(st.lists(st.sampled_from(PULL_NAMES), max_size=3)):
        p += Part(rec(4, LEN, name), ("unknown name",) if name in NEVER or name == "" else (),
                  (f"names[{name[:12]!r}]",))
    for r in draw(st.lists(rows(pull=True), max_size=2)):
        p += Part(rec(5, LEN, r.msg), r.bad, r.notes)
    clock = draw(st.sampled_from([None, None, -1, -1, 0, 3, MAX_I64, -(1 << 63)]))
    deadline = 2.0
    if clock is not None:
        p += Part(rec(6, VARINT, clock), (), (f"min_clock={clock}",))
        if clock > 0:
            deadline = 0.5
    p += Part(rec(7, LEN, draw(st.sampled_from(WORKERS[:6]))))
    if draw(st.integers(0, 3)) == 0:
        p += Part(rec(8, VARINT, draw(st.sampled_from([1, 2, MAX_U64]))), (), ("no_dense",))
    p += draw(unknowns((9, 10, 100)))
    return p, deadline
