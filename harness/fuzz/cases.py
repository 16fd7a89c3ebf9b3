"""Fuzz cases for the psnodes gRPC surface: one seed, one sequence of hostile requests.

A `Case` is plain data: the method, which copy gets it (the primary or a replica), which token
it carries, its body (wire records with send-time placeholders, see protowire), a label saying
what is hostile about it, and `must_refuse` when any correct server must refuse it (then an OK
that changed state is a violation). Bodies come in three forms per method: random bytes,
byte edits of a structured request, and structured requests with hostile fields.

Generation is hypothesis strategies driven by one seed (harness/fuzz/seeded.py): case i is drawn
from a random seeded by (seed, i), lazily (a long run starts at once) and without a cluster.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterator

from hypothesis import strategies as st

from psnodes.channels import TOKEN_HEADER

from . import seeded
from .messages import pull_request, push_request
from .parts import MAX_U64, Part, rec, unknowns
from .protowire import LEN, VARINT, Big, Body, Msg, Mutated
from .replicate import replicate_request

METHODS = ("Push", "Pull", "Replicate", "Snapshot", "Status", "Echo")
BAD_AUTH = ("missing", "wrong", "empty", "case", "prefix", "suffix", "space", "other-header")
PEER_AUTH = ("no-peer", "wrong-peer")       # the cluster token but not the peer token (Replicate)
#: psnodes.channels.PEER_HEADER where psnodes has one (its older versions have no peer token)
PEER_HEADER = "x-pschaos-peer-token"
DEADLINE = 2.0


@dataclass(frozen=True)
class Case:
    method: str
    target: str                  # "primary" or "replica"
    auth: str                    # "ok" or one of BAD_AUTH
    body: Body
    label: str
    must_refuse: bool = False
    deadline: float = DEADLINE
    parallel: int = 1            # concurrent identical calls (Snapshot)


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
    shard = draw(st.sampled_from([None, 0, 0, 1, -1, (1 << 31) - 1]))
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


def structured(method: str, who: str | None = None):
    """The strategy of structured requests of one method: Part, or (Part, deadline) for Pull."""
    return {"Push": push_request(), "Pull": pull_request(), "Replicate": replicate_request(who),
            "Snapshot": snapshot_request(), "Status": status_request(), "Echo": echo_request()}[method]


FIXED_BODIES = {"Status": [b"\x08", b"\x08\x01\x10", b"\xff", b"\x0a\x05abc", b"\x18\x01\x18"],
                "Echo": [b"", b"\x00" * 64]}

EDIT = st.tuples(st.sampled_from(["trunc", "flip", "insert", "delete"]),
                 st.integers(0, 1000).map(lambda i: i / 1000), st.integers(0, 255))


@st.composite
def case(draw) -> Case:
    # Push and Replicate change state, so they get twice the share; a Replicate matters most at a
    # replica (a primary refuses them all at its own epoch)
    method = draw(st.sampled_from(METHODS + ("Push", "Replicate")))
    target = draw(st.sampled_from(["primary", "replica"] + (["replica"] if method == "Replicate" else [])))
    bad = BAD_AUTH + (PEER_AUTH * 2 if method == "Replicate" else ())
    auth = draw(st.integers(0, 9).flatmap(lambda i: st.sampled_from(bad) if i == 0 else st.just("ok")))
    form = draw(st.sampled_from(["structured", "structured", "structured", "random", "mutated"]))
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
                    parallel=parallel)
    # a mutated Replicate names a sender no byte edit can turn into a real node's name
    got = draw(structured(method, "fake:zz-fuzzer-node" if form == "mutated" else None))
    part, deadline = got if isinstance(got, tuple) else (got, DEADLINE)
    if form == "mutated":
        edits = tuple(draw(st.lists(EDIT, min_size=1, max_size=4)))
        return Case(method, target, auth, Mutated(part.msg, edits),
                    f"mutated {'/'.join(e[0] for e in edits)} of: {_label(part)}"[:200], deadline=deadline,
                    parallel=parallel)
    bad = part.bad + (("push to a replica",) if method == "Push" and target == "replica" else ())
    return Case(method, target, auth, part.msg, _label(Part(part.msg, bad, part.notes)),
                must_refuse=bool(bad) and method == "Push", deadline=deadline, parallel=parallel)


def case_seed(seed: int, index: int, attempt: int = 0) -> int:
    return int.from_bytes(hashlib.blake2b(f"pschaos-fuzz:{seed}:{index}:{attempt}".encode(),
                                          digest_size=8).digest(), "big")


def generate(seed: int, n: int) -> Iterator[Case]:
    """`n` cases from `seed`, the same every time. Case i depends on (seed, i) alone, so a
    shorter run is a prefix of a longer one."""
    return seeded.draws(case(), lambda i, attempt: case_seed(seed, i, attempt), n)
