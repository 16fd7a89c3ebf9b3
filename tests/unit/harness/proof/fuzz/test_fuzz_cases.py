"""The fuzzer's cases without a cluster: one seed gives one sequence, the wire encoder agrees with
protobuf, bad tokens never carry the token, no forged Replicate could be told apart from the real
primary's (harness/proof/fuzz/replicate.py: out of scope, never generated) and every other is marked
must_refuse, structured requests mostly get past parsing and routing, the specials come in turn,
answers are placed on the way into the handler, and node logs are read for errors."""
from collections import Counter
from dataclasses import astuple, replace

import numpy as np
import pytest
from google.protobuf.message import DecodeError

from pschaos.harness.proof.fuzz import cases as fc
from pschaos.harness.proof.fuzz.cases import BAD_AUTH, PEER_AUTH, PEER_HEADER, generate, metadata, refused_by_auth
from pschaos.harness.proof.fuzz.nodelogs import LogWatch
from pschaos.harness.proof.fuzz.parts import AUDIT, BIG
from pschaos.harness.proof.fuzz.protowire import I32, I64, LEN, SGROUP, VARINT, Ctx, Msg, encode, render
from pschaos.harness.proof.fuzz.replicate import empty_state
from pschaos.harness.proof.fuzz.report import reach_of
from pschaos.psnodes.store.blob import pack, unpack
from pschaos.psnodes.wire.channels import TOKEN_HEADER
from pschaos.psnodes.store.optimizers import OptimizerConfig
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.state import ShardSpec
from pschaos.psnodes.store.store import ShardStore

CTX = Ctx(epoch=3, primary="shard-0/0", target="shard-0/1", other="shard-0/2", seq=12, seq_epoch=3,
          token="0123456789abcdef0123456789abcdef")
NODES = {"primary": "shard-0/0", "replica": "shard-0/1", "replica2": "shard-0/2"}
PARSERS = {"Push": ps_pb2.PushRequest, "Pull": ps_pb2.PullRequest, "Replicate": ps_pb2.ReplicateRequest,
           "Snapshot": ps_pb2.SnapshotRequest, "Status": ps_pb2.StatusRequest, "Echo": ps_pb2.Blob}


def ctx_of(c) -> Ctx:
    """The context a case is rendered in at send time: its target copy's name, the other one."""
    target = NODES[c.target]
    other = next(n for n in NODES.values() if n not in (target, CTX.primary)) if target != CTX.primary \
        else NODES["replica"]
    return replace(CTX, target=target, other=other)


def sequence(seed: int, n: int) -> list[tuple]:
    return [astuple(replace(c, body=b"")) + (render(c.body, ctx_of(c)),) for c in generate(seed, n)]


@pytest.fixture(scope="module")
def many():
    return list(generate(3, 1600))


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


# ------------------------------------------------------------------------- Replicate
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
    """psnodes' own check refuses it (any exception) for a copy at seq 12 with the fuzzer's params."""
    store = ShardStore(ShardSpec(shard=0, num_shards=1, tables={"emb": 8}, optimizer=OptimizerConfig("adam", 0.01)))
    store.seq = CTX.seq
    try:
        store.check_state(state)
    except Exception:  # noqa: BLE001 - any failure to load is what we want
        return True
    return False


def test_no_forged_replicate_is_indistinguishable_from_the_primary(many):
    """Every Replicate that reaches a replica naming the real primary at the current epoch carries
    nothing a correct replica could take: no parseable, defect-free entry at seq+1 within
    [seq_epoch, epoch], no loadable state. Every other (a forged sender, epoch or shard, a
    malformed record, the target itself) is must_refuse, whatever it carries."""
    checked = forged = 0
    for c in many:
        if c.method != "Replicate" or c.form == "random":
            continue
        ctx = ctx_of(c)
        try:
            req = ps_pb2.ReplicateRequest.FromString(render(c.body, ctx))
        except DecodeError:
            assert c.must_refuse, c.label
            continue
        if (req.primary, req.epoch, req.shard) != (ctx.primary, ctx.epoch, 0) or ctx.target == ctx.primary:
            assert c.must_refuse, c.label
            forged += 1
            continue
        checked += 1
        assert not req.state or _state_is_bad(req.state), c.label
        for e in req.entries:
            if e.seq == ctx.seq + 1 and ctx.seq_epoch <= e.epoch <= ctx.epoch:
                try:
                    upd = ps_pb2.Update.FromString(e.payload)
                except DecodeError:
                    continue
                assert _defective(upd), c.label
        assert req.state or req.entries, c.label
    assert checked >= 120 and forged >= 60


def test_self_named_and_forged_senders_are_must_refuse(many):
    named = Counter()
    for c in many:
        if c.method != "Replicate" or c.form not in ("structured", "special"):
            continue
        try:
            req = ps_pb2.ReplicateRequest.FromString(render(c.body, ctx_of(c)))
        except DecodeError:
            continue
        if req.primary == ctx_of(c).target:
            named["self"] += 1
            assert c.must_refuse, c.label
        if req.epoch != CTX.epoch:
            named["epoch"] += 1
            assert c.must_refuse, c.label
        named[c.target] += 1
    assert named["self"] >= 10 and named["epoch"] >= 30 and named["replica2"] >= 100, named


def test_the_valid_looking_blob_template_loads():
    meta, arrays = empty_state()
    assert unpack(pack(meta, arrays))[0] == meta and meta["full"] and meta["shard"] == 0


# ------------------------------------------------------------------------------- reach
def test_structured_requests_get_past_parsing_and_routing(many):
    """Most structured requests parse and carry the right shard; Push and Pull mostly go to the
    primary with an acceptable client epoch; most Replicates come from the true primary."""
    got = Counter()
    for c in many:
        if c.form != "structured":
            continue
        got[c.method, "sent"] += 1
        try:
            m = PARSERS[c.method].FromString(render(c.body, ctx_of(c)))
        except DecodeError:
            continue
        got[c.method, "parse"] += 1
        if c.method in ("Echo", "Status") or m.shard != 0:
            continue
        got[c.method, "shard"] += 1
        if c.method in ("Push", "Pull") and c.target == "primary" and m.epoch <= CTX.epoch:
            got[c.method, "routed"] += 1
        if c.method == "Replicate" and c.target != "primary" and (m.primary, m.epoch) == (CTX.primary, CTX.epoch):
            got[c.method, "routed"] += 1
    for m in fc.METHODS:
        assert got[m, "parse"] >= 0.85 * got[m, "sent"], (m, got)
        if m not in ("Echo", "Status"):
            assert got[m, "shard"] >= 0.7 * got[m, "sent"], (m, got)
    for m in ("Push", "Pull", "Replicate"):
        assert got[m, "routed"] >= 0.6 * got[m, "sent"], (m, got)


def test_forms_keep_their_shares(many):
    forms = Counter(c.form for c in many)
    assert 0.15 * len(many) <= forms["random"] <= 0.25 * len(many), forms
    assert forms["special"] == len(many) // fc.SPECIAL_EVERY + 1, forms     # + the slow one at SLOW_AT


def test_specials_come_in_turn_wrong_audit_shapes_before_the_right_one():
    n = fc.SPECIAL_EVERY * len(fc.SPECIALS)
    specials = [(i, c) for i, c in enumerate(generate(4, n)) if c.form == "special"]
    labels = [c.label for _, c in specials]
    audit = [i for i, c in specials if c.label.startswith(f"INIT {AUDIT[0]}")]
    right = [i for i, c in specials if "of its own shape" in c.label]
    assert len(right) == 1 and len(audit) >= 3 and audit[-1] == right[0]
    assert any(f"[{BIG[0]!r}] x" in x for x in labels)
    assert any("self-named" in x for x in labels) and any("nested 200000 deep" in x for x in labels)
    assert any(c.method == "Snapshot" and c.parallel >= 16 for _, c in specials)
    assert any("clock 2**63-1" in x for x in labels) and any("since_seq 0" in x for x in labels)
    long = [c for _, c in specials if c.expect]
    assert len(long) >= 4 and all(len(render(c.body, ctx_of(c))) > 20 * 1024 for c in long)
    slow = list(generate(4, fc.SLOW_AT + 1))[fc.SLOW_AT]
    assert slow.probe and slow.deadline >= 3600 and slow.parallel >= 4
    assert ps_pb2.PullRequest.FromString(render(slow.body, CTX)).min_clock == (1 << 63) - 1


def test_the_audit_init_specials():
    """The first two specials of every run: INITs of the audit tensor of another shape, then of
    4M elements, both before the one of the right shape."""
    seen = set()
    for s in range(30):
        for c in list(generate(s, 2 * fc.SPECIAL_EVERY))[fc.SPECIAL_EVERY - 1::fc.SPECIAL_EVERY]:
            upd = ps_pb2.PushRequest.FromString(render(c.body, CTX)).update
            t = upd.dense[0]
            assert upd.kind == ps_pb2.Update.INIT and t.name == AUDIT[0] and list(t.shape) != list(AUDIT[1])
            assert c.must_refuse and len(t.data) == 4 * int(np.prod(t.shape))
            seen.add(tuple(t.shape))
    assert (1 << 22,) in seen and len(seen) >= 5


def test_pull_specials():
    c = next(c for c in generate(2, 200) if c.form == "special" and c.method == "Pull" and "x 64" in c.label)
    req = ps_pb2.PullRequest.FromString(render(c.body, CTX))
    assert req.names == [BIG[0]] * 64 and c.must_refuse


@pytest.mark.parametrize("method,code,details,want", [
    ("Push", "OK", "", "reached"),
    ("Push", "INVALID_ARGUMENT", "Push: the request does not parse as pschaos.ps.PushRequest (DecodeError)", "parse"),
    ("Push", "INVALID_ARGUMENT", "Push: shard=1 but shard-0/0 serves shard 0; route by the shard record", "routing"),
    ("Push", "UNAVAILABLE", "shard-0/1 is not the primary of shard 0 (epoch 1); primary is shard-0/0", "routing"),
    ("Push", "UNAVAILABLE", "shard-0/0 is at epoch 1 but the client knows epoch 2", "routing"),
    ("Push", "INVALID_ARGUMENT", "dense['fz/vec'].dtype='float64' is not supported; send float32", "reached"),
    ("Push", "NOT_FOUND", "dense['fz/never'] is not initialized on shard 0", "reached"),
    ("Pull", "RESOURCE_EXHAUSTED", "sparse holds more than limits.max_ids=65536 ids in all", "reached"),
    ("Pull", "RESOURCE_EXHAUSTED", "Received message larger than max (300 vs. 200)", "transport"),
    ("Pull", "DEADLINE_EXCEEDED", "min_clock=3: the slowest worker is at clock 0; BSP/SSP wait timed out", "reached"),
    ("Pull", "DEADLINE_EXCEEDED", "Deadline Exceeded", "timeout"),
    ("Replicate", "FAILED_PRECONDITION", "replicate from shard-0/2 at epoch 1 refused by shard-0/1: ...", "sender"),
    ("Replicate", "UNAVAILABLE", "replicate from x at epoch 1: etcd could not confirm the shard record", "sender"),
    ("Replicate", "INVALID_ARGUMENT", "Replicate: primary is 20480 characters long", "sender"),
    ("Replicate", "INVALID_ARGUMENT", "entries[0] (seq 13): update.kind=2 is unknown", "reached"),
    ("Replicate", "INVALID_ARGUMENT", "entries[0] (seq 11): Replicate entries[0].payload: the request does not "
                                      "parse as pschaos.ps.Update", "reached"),
    ("Push", "INVALID_ARGUMENT", "Push: the request could not be split (x)", "parse"),
    ("Replicate", "INVALID_ARGUMENT", "state: state blob header is not JSON", "reached"),
    ("Status", "UNAUTHENTICATED", "missing or wrong x-pschaos-token metadata", "auth"),
    ("Snapshot", "INTERNAL", "Snapshot: internal error", "error"),
    ("Snapshot", "UNKNOWN", "Stream removed", "error"),
])
def test_reach_of(method, code, details, want):
    assert reach_of(method, code, details) == want


# -------------------------------------------------------------------------- node logs
def test_node_log_errors_are_found_once_each(tmp_path):
    log = tmp_path / "shard-0-1.log"
    debug = "2026-01-01 10:00:00,001 DEBUG psnodes.rpc [shard-0/1] refused Pull: INVALID_ARGUMENT names\n"
    err = ("2026-01-01 10:00:00,002 ERROR psnodes.rpc [shard-0/1] Replicate failed on an unexpected error\n"
           "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n")
    log.write_text(debug + err)
    (tmp_path / "worker-0.log").write_text(err)            # not a node's log
    w = LogWatch(tmp_path)
    got = w.new_errors()
    assert len(got) == 1 and got[0][0] == "shard-0-1" and "unexpected error" in got[0][1]
    with open(log, "a") as f:                               # the rest of that traceback, then a new one
        f.write("RecursionError: maximum recursion depth exceeded\n" + debug + "Traceback (most recent call last):\n"
                "  File \"y.py\", line 2\nValueError: boom\n2026-01-01 10:00:01,000 WARNING psnodes.node [x] slow\n"
                "2026-01-01 10:00:01,5")                    # a partial line: read next time
    got = w.new_errors()
    assert len(got) == 1 and "ValueError: boom" in got[0][1]
    with open(log, "a") as f:
        f.write("00 CRITICAL psnodes.node [shard-0/1] gone\n")
    assert [t for _, t in w.new_errors()] == ["2026-01-01 10:00:01,500 CRITICAL psnodes.node [shard-0/1] gone"]
    assert w.new_errors() == [] and LogWatch(tmp_path / "missing").new_errors() == []
