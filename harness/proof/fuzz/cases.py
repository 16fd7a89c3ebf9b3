"""Fuzz cases for the psnodes gRPC surface: one seed, one sequence of hostile requests.

A `Case` is plain data: the method, which copy gets it (the primary, the first replica or the
second), which token it carries, its body (wire records with send-time placeholders, see
protowire), a label saying what is hostile about it, and what any correct server must do with
it: `must_refuse` (an OK that changed state is a violation; for a Pull, any OK), `must_accept`
(a definite refusal is a violation), `expect` (a refusal must name one of these fields, not be
gRPC's "Stream removed").

Bodies come in four forms. Random bytes and byte edits of a structured request (a fifth of the
cases each) test the parsing. Structured requests (three fifths) parse, carry the right shard and
mostly an acceptable envelope (the primary, the client epoch, for a Replicate the true primary
at the current epoch, to a replica), so the handler's content checks are what answers them:
one in sixteen carries a malformed record instead. Specials are hand-written cases no draw is
likely to produce (an INIT of the audit tensor with a wrong shape or 4M elements while the shard
has none, 64 copies of the largest name in one Pull, a Replicate naming its target as sender, a
state header nested 200,000 deep, Snapshot storms, 20 KiB strings, a push at clock 2**63-1, Pulls
that ask to wait a day for a clock no worker reaches): every SPECIAL_EVERY-th case is the next of
them in turn, and the day-long Pulls (each holds the run for the server's wait cap) come once
per SLOW_EVERY cases.

Generation is hypothesis strategies driven by one seed (harness/proof/fuzz/seeded.py): case i is drawn
from a random seeded by (seed, i), lazily (a long run starts at once) and without a cluster.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterator

from hypothesis import strategies as st

from pschaos.psnodes.wire.channels import TOKEN_HEADER

from pschaos.harness.proof.fuzz import seeded
from pschaos.harness.proof.fuzz.messages import pull_request, push_request
from pschaos.harness.proof.fuzz.parts import AUDIT, BIG, MAX_I64, MAX_U64, Part, broken_wire, floats, packed, rec, unknowns
from pschaos.harness.proof.fuzz.protowire import LEN, VARINT, Big, Body, Msg, Mutated, Sym
from pschaos.harness.proof.fuzz.replicate import LONG, long_primary_request, nested_blob_request, replicate_request, self_named_request

METHODS = ("Push", "Pull", "Replicate", "Snapshot", "Status", "Echo")
BAD_AUTH = ("missing", "wrong", "empty", "case", "prefix", "suffix", "space", "other-header")
PEER_AUTH = ("no-peer", "wrong-peer")       # the cluster token but not the peer token (Replicate)
#: pschaos.psnodes.wire.channels.PEER_HEADER where psnodes has one (its older versions have no peer token)
PEER_HEADER = "x-pschaos-peer-token"
DEADLINE = 2.0


@dataclass(frozen=True)
class Case:
    method: str
    target: str                  # "primary", "replica" (the first other copy) or "replica2" (the second)
    auth: str                    # "ok" or one of BAD_AUTH / PEER_AUTH
    body: Body
    label: str
    must_refuse: bool = False
    deadline: float = DEADLINE
    parallel: int = 1            # concurrent identical calls (Snapshot storms, day-long Pulls)
    form: str = "structured"     # "structured", "random", "mutated" or "special"
    expect: tuple[str, ...] = ()  # a refusal's details must name one of these (the field)
    must_accept: bool = False    # any correct server answers OK (else UNAVAILABLE / DEADLINE_EXCEEDED)
    observe: bool = False        # what happened is reported (summary "observed"), and judged as usual
    probe: bool = False          # while the calls wait, a Status to the same copy must answer


def metadata(auth: str, token: str, peer_token: str = "") -> tuple[tuple[str, str], ...]:
    """The call metadata of a case. A Replicate also carries the peer token (a cluster that has
    one refuses Replicate without it), so the fuzzer plays the strongest outsider there is: a
    holder of both tokens. Header names stay lower case: HTTP/2 cannot carry others (gRPC
    refuses them on the client side), so "wrong case" is the token's value."""
    peer = ((PEER_HEADER, peer_token),) if peer_token else ()
    if auth in ("ok", "no-peer", "wrong-peer"):
        if auth == "no-peer":
            return ((TOKEN_HEADER, token),)
        return ((TOKEN_HEADER, token),) + (((PEER_HEADER, peer_token + "x"),) if auth == "wrong-peer" else peer)
    if auth == "missing":
        return peer
    if auth == "other-header":
        return ((TOKEN_HEADER + "s", token),) + peer
    swapped = token.swapcase() if token.swapcase() != token else "Z" + token[1:]
    value = {"wrong": "not-the-token", "empty": "", "case": swapped, "prefix": token[:-1],
             "suffix": token + "x", "space": " " + token}[auth]
    return ((TOKEN_HEADER, value),) + peer


def refused_by_auth(auth: str, method: str, peer_token: str) -> bool:
    """Whether a correct server refuses this call UNAUTHENTICATED whatever its body: a bad cluster
    token always; a missing or wrong peer token on a Replicate when the cluster has one."""
    if auth in PEER_AUTH:
        return method == "Replicate" and bool(peer_token)
    return auth != "ok"


def _label(p: Part) -> str:
    return "; ".join(dict.fromkeys(p.bad + p.notes))[:200] or "valid"


@st.composite
def snapshot_request(draw) -> Part:
    shard = draw(st.sampled_from([None] * 4 + [0] * 4 + [1, -1, (1 << 31) - 1]))
    p = Part(rec(1, VARINT, shard) if shard is not None else Msg(), (), (f"shard={shard}",))
    return p + draw(unknowns((2, 3, 100)))


@st.composite
def status_request(draw) -> Part:
    p = Part(Msg())
    for field in (1, 2, 3):
        v = draw(st.sampled_from([None, 1, 2, MAX_U64]))
        if v is not None:
            p += Part(rec(field, VARINT, v))
    return p + draw(unknowns((4, 5, 100)))


@st.composite
def echo_request(draw) -> Part:
    return Part(rec(1, LEN, draw(st.binary(max_size=256))), (), ("blob",)) + draw(unknowns((2, 3)))


def structured(method: str, target: str = "replica", who: str | None = None):
    """The strategy of structured requests of one method: Part, or (Part, deadline) for Pull."""
    if method == "Replicate":
        return replicate_request(target, who)
    return {"Push": push_request(), "Pull": pull_request(), "Snapshot": snapshot_request(),
            "Status": status_request(), "Echo": echo_request()}[method]


FIXED_BODIES = {"Status": [b"\x08", b"\x08\x01\x10", b"\xff", b"\x0a\x05abc", b"\x18\x01\x18"],
                "Echo": [b"", b"\x00" * 64]}

EDIT = st.tuples(st.sampled_from(["trunc", "flip", "insert", "delete"]),
                 st.integers(0, 1000).map(lambda i: i / 1000), st.integers(0, 255))
TOP_FIELDS = {"Push": (4, 5, 15, 100), "Pull": (9, 10, 100), "Replicate": (7, 10, 100), "Snapshot": (2, 3, 100),
              "Status": (4, 5, 100), "Echo": (2, 3)}


def _target(draw, method: str) -> str:
    # a Replicate matters at a replica (a primary refuses them all at its own epoch), a Push or
    # Pull at the primary (a replica refuses both before reading them); both replicas get theirs
    weights = {"Replicate": ["replica"] * 9 + ["replica2"] * 9 + ["primary"],
               "Push": ["primary"] * 14 + ["replica", "replica2"],
               "Pull": ["primary"] * 14 + ["replica", "replica2"]}
    return draw(st.sampled_from(weights.get(method, ["primary", "replica", "replica2"])))


@st.composite
def case(draw) -> Case:
    # Push and Replicate change state, so they get twice the share
    method = draw(st.sampled_from(METHODS + ("Push", "Replicate")))
    target = _target(draw, method)
    form = draw(st.sampled_from(["structured", "structured", "structured", "random", "mutated"]))
    bad = BAD_AUTH + (PEER_AUTH * 2 if method == "Replicate" else ())
    # a bad token in one case of ten (one of twenty structured ones: their content is the point)
    one_in = 20 if form == "structured" else 10
    auth = draw(st.integers(0, one_in - 1).flatmap(lambda i: st.sampled_from(bad) if i == 0 else st.just("ok")))
    parallel = draw(st.integers(1, 4)) if method == "Snapshot" else 1
    if form == "random":
        fixed = FIXED_BODIES.get(method, [])
        if fixed and draw(st.booleans()):
            body: Body = draw(st.sampled_from(fixed))
        elif method == "Echo" and draw(st.integers(0, 19)) == 0:
            body = Big("bytes", draw(st.sampled_from([1 << 16, 1 << 20])), draw(st.integers(0, 1 << 30)))
        else:
            body = draw(st.binary(max_size=600))
        return Case(method, target, auth, body, f"random {len(body) if isinstance(body, bytes) else body.n} bytes",
                    parallel=parallel, form="random")
    # a mutated Replicate names a sender no byte edit can turn into a real node's name
    got = draw(structured(method, target, "fake:zz-fuzzer-node" if form == "mutated" else None))
    part, deadline = got if isinstance(got, tuple) else (got, DEADLINE)
    if form == "mutated":
        edits = tuple(draw(st.lists(EDIT, min_size=1, max_size=4)))
        return Case(method, target, auth, Mutated(part.msg, edits),
                    f"mutated {'/'.join(e[0] for e in edits)} of: {_label(part)}"[:200], deadline=deadline,
                    parallel=parallel, form="mutated", must_refuse=method == "Replicate")
    if draw(st.integers(0, 15)) == 0:        # one malformed record somewhere: it must not parse
        broken = draw(broken_wire(TOP_FIELDS[method]))
        at = draw(st.integers(0, len(part.msg.fields)))
        f = part.msg.fields
        part = Part(Msg(f[:at] + broken.msg.fields + f[at:]), part.bad + broken.bad, part.notes)
    bad = part.bad + (("push to a replica",) if method == "Push" and target != "primary" else ())
    return Case(method, target, auth, part.msg, _label(Part(part.msg, bad, part.notes)),
                must_refuse=bool(bad) and method in ("Push", "Replicate"), deadline=deadline, parallel=parallel)


# ------------------------------------------------------------------------------------ specials
def _push_body(update: Msg) -> Msg:
    return rec(1, VARINT, 0) + rec(2, VARINT, Sym("epoch")) + rec(3, LEN, update)


def _tensor(name: str, shape: list[int], data, dtype: str = "float32") -> Msg:
    return rec(1, LEN, name) + (rec(2, LEN, packed(shape)) if shape else Msg()) + rec(3, LEN, dtype) + rec(4, LEN, data)


def _n(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@st.composite
def audit_init_wrong(draw, huge: bool = False) -> Case:
    """An INIT of the audit tensor of another shape than [256], or of 4M elements (`huge`)."""
    shape = [1 << 22] if huge else draw(st.sampled_from([[4], [], [255], [257], [256, 1], [16, 16]]))
    n = _n(shape)
    data = Big("zeros", 4 * n, 0) if n > 4096 else bytes(4 * n)
    upd = rec(1, VARINT, 1) + rec(5, LEN, _tensor(AUDIT[0], shape, data))
    return Case("Push", "primary", "ok", _push_body(upd), f"INIT {AUDIT[0]} shape={shape} ({n} elements), "
                f"the audit tensor is [{AUDIT[1][0]}]", must_refuse=True, form="special",
                deadline=10.0 if n > 4096 else DEADLINE)


def audit_init_right() -> st.SearchStrategy:
    upd = rec(1, VARINT, 1) + rec(5, LEN, _tensor(AUDIT[0], list(AUDIT[1]), bytes(4 * AUDIT[1][0])))
    return st.just(Case("Push", "primary", "ok", _push_body(upd), f"INIT {AUDIT[0]} of its own shape "
                        "(set-if-absent)", form="special", must_accept=True))


@st.composite
def pull_repeated(draw) -> Case:
    times = draw(st.sampled_from([64, 64, 256]))
    p = rec(1, VARINT, 0) + rec(2, VARINT, Sym("epoch"))
    for _ in range(times):
        p += rec(4, LEN, BIG[0])
    p += rec(6, VARINT, -1)
    return Case("Pull", "primary", "ok", p, f"names = [{BIG[0]!r}] x {times} (the largest parameter, "
                f"{4 * _n(BIG[1]) >> 10} KiB each)", must_refuse=True, form="special", deadline=5.0)


@st.composite
def pull_all(draw) -> Case:
    p = rec(1, VARINT, 0) + rec(2, VARINT, Sym("epoch")) + rec(3, VARINT, 0) + rec(6, VARINT, -1) + \
        rec(7, LEN, draw(st.sampled_from(["fz-w", "worker-0"])))
    return Case("Pull", "primary", "ok", p, "no names, since_seq 0: every dense tensor", form="special",
                must_accept=True, deadline=5.0)


def _replicate(strategy, label: str, must_refuse: bool, expect: tuple[str, ...] = ()):
    @st.composite
    def make(draw) -> Case:
        part = draw(strategy)
        return Case("Replicate", draw(st.sampled_from(["replica", "replica2"])), "ok", part.msg,
                    f"{label}: {_label(part)}"[:200], must_refuse=must_refuse, form="special", expect=expect,
                    deadline=5.0)
    return make()


@st.composite
def snapshot_storm(draw) -> Case:
    """16 to 48 Snapshots at once (more than a node's 16 RPC threads): answered within their
    deadline, the copy answering Status meanwhile, and (at a replica) its primary's heartbeats
    still heard: no election."""
    n = draw(st.sampled_from([16, 24, 32, 48]))
    body = draw(st.sampled_from([Msg(), rec(1, VARINT, 0)]))
    return Case("Snapshot", draw(st.sampled_from(["primary", "replica", "replica2"])), "ok", body,
                f"Snapshot storm: {n} at once", parallel=n, form="special", probe=True)


def _long(draw) -> str:
    return draw(st.sampled_from(["n" * LONG, "fz/" + "\u00e9" * (LONG // 2), "fz/vec" + " " * LONG]))


@st.composite
def long_string(draw) -> Case:
    """A 20 KiB string in one field; a refusal must name that field."""
    where = draw(st.sampled_from(["push-name", "init-name", "dtype", "worker", "push-table", "pull-name",
                                  "pull-table"]))
    big = _long(draw)
    label = f"{where} of {len(big.encode())} bytes"
    if where.startswith("pull"):
        p = rec(1, VARINT, 0) + rec(2, VARINT, Sym("epoch"))
        if where == "pull-name":
            p += rec(4, LEN, big)
            expect = ("name",)
        else:
            p += rec(5, LEN, rec(1, LEN, big) + rec(2, LEN, bytes(8)))
            expect = ("table", "sparse")
        return Case("Pull", "primary", "ok", p, label, form="special", expect=expect)
    upd = rec(2, LEN, "fz-long") + rec(3, VARINT, draw(st.integers(1, 1 << 30))) + rec(7, VARINT, 1)
    must = True
    if where in ("push-name", "init-name"):
        upd = (rec(1, VARINT, 1) if where == "init-name" else Msg()) + upd + rec(5, LEN, _tensor(big, [4], bytes(16)))
        expect, must = ("name",), where == "push-name"      # a PUSH of a name never initialized
    elif where == "dtype":
        upd += rec(5, LEN, _tensor("fz/vec", [4], bytes(16), dtype=big))
        expect = ("dtype",)
    elif where == "worker":
        upd += rec(2, LEN, big) + rec(5, LEN, _tensor("fz/vec", [4], bytes(16)))
        expect, must = ("worker",), False
    else:
        upd += rec(6, LEN, rec(1, LEN, big) + rec(2, LEN, bytes(8)) + rec(3, VARINT, 8) + rec(4, LEN, bytes(32)))
        expect = ("table", "sparse")
    return Case("Push", "primary", "ok", _push_body(upd), label, form="special", expect=expect, must_refuse=must)


@st.composite
def push_clock_max(draw) -> Case:
    upd = rec(2, LEN, "fz-clock") + rec(3, VARINT, draw(st.integers(1, 1 << 40))) + rec(4, VARINT, MAX_I64) + \
        rec(7, VARINT, 1) + rec(5, LEN, _tensor("fz/vec", [4], floats(4, "ok", draw(st.integers(0, 99)))))
    return Case("Push", "primary", "ok", _push_body(upd), "valid push at clock 2**63-1 (the worker's clock "
                "would become 2**63)", form="special", observe=True)


@st.composite
def pull_wait_cap(draw) -> Case:
    """Pulls waiting for a clock no worker reaches, with a day-long deadline: the server's own
    cap must answer them (DEADLINE_EXCEEDED), and the copy must go on answering meanwhile."""
    n = draw(st.integers(4, 8))
    p = rec(1, VARINT, 0) + rec(2, VARINT, Sym("epoch")) + rec(6, VARINT, MAX_I64) + rec(7, LEN, "fz-w")
    return Case("Pull", "primary", "ok", p, f"{n} Pulls at once, min_clock=2**63-1, client deadline one day",
                parallel=n, deadline=86400.0, form="special", probe=True)


#: in turn, one every SPECIAL_EVERY cases; the audit INITs of wrong shapes come before the right one
SPECIALS = (audit_init_wrong(), audit_init_wrong(huge=True), pull_repeated(),
            _replicate(self_named_request(), "self-named", True),
            _replicate(nested_blob_request(), "nested header", False, ("state",)), snapshot_storm(),
            long_string(), _replicate(long_primary_request(), "long primary", True, ("primary",)),
            pull_all(), push_clock_max(), long_string(), snapshot_storm(),
            _replicate(self_named_request(), "self-named", True), long_string(), audit_init_right())
SPECIAL_EVERY = 16
SLOW_EVERY, SLOW_AT = 1500, 700


def strategy_of(index: int):
    """The strategy case `index` is drawn from."""
    if index % SLOW_EVERY == SLOW_AT:
        return pull_wait_cap()
    if index % SPECIAL_EVERY == SPECIAL_EVERY - 1:
        return SPECIALS[(index // SPECIAL_EVERY) % len(SPECIALS)]
    return case()


def case_seed(seed: int, index: int, attempt: int = 0) -> int:
    return int.from_bytes(hashlib.blake2b(f"pschaos-fuzz:{seed}:{index}:{attempt}".encode(),
                                          digest_size=8).digest(), "big")


def generate(seed: int, n: int) -> Iterator[Case]:
    """`n` cases from `seed`, the same every time. Case i depends on (seed, i) alone, so a
    shorter run is a prefix of a longer one."""
    return seeded.draws(strategy_of, lambda i, attempt: case_seed(seed, i, attempt), n)
