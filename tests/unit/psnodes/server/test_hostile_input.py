"""Hostile input never changes state (issue 15), at the store and node level: each refusal named,
each refused request leaving parameters, optimizer state, log, applied set and checksum as they were."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pschaos.psnodes.store.blob import pack, unpack
from pschaos.psnodes.wire.codec import rows_to_pb, tensor_to_pb
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.errors import ConfigError, InvalidArgument, StaleEpoch, TooLarge
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.store.optimizers import OptimizerConfig
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.state import ShardSpec
from pschaos.psnodes.store.store import ShardStore
from pschaos.psnodes.store.updatelog import Entry

from tests.unit.helpers import init, push, push_update, store


def fingerprint(s: ShardStore) -> tuple:
    return (s.seq, s.seq_epoch, s.checksum(), s.log.last_seq, s.applied.count(), s.pushes,
            {n: a.shape for n, a in s.dense.items()})


def refused(s: ShardStore, upd: ps_pb2.Update, exc=InvalidArgument, words: str = "") -> str:
    before = fingerprint(s)
    with pytest.raises(exc) as e:
        s.apply(s.validate(upd), upd.SerializeToString(), 1)
    assert fingerprint(s) == before
    assert words in str(e.value)
    return str(e.value)


def test_an_unknown_update_kind_is_refused_before_anything_else():
    s = store()
    init(s)
    # the issue's case: a Push body whose update has kind 2 and an empty worker (kind 2 is a shard's
    # own MIGRATE entry since elastic shards: its state must be an export's blob, and the node's Push
    # refuses every kind but PUSH and INIT before the store sees it); and a wrong-shape gradient with kind 7
    refused(s, ps_pb2.PushRequest.FromString(bytes.fromhex("10011a0408021807")).update, words="MIGRATE: state")
    u = push_update(1, dense={"w": np.ones(5)})
    u.kind = 7
    refused(s, u, words="update.kind=7")


def test_shapes_that_overflow_or_exceed_the_limits_are_refused():
    s = store()
    init(s)
    huge = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[ps_pb2.Tensor(name="x", shape=[2**32, 2**32],
                                                                      dtype="float32")])
    refused(s, huge, TooLarge, "limits.max_elements")
    deep = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[ps_pb2.Tensor(name="x", shape=[1] * 65,
                                                                      dtype="float32", data=bytes(4))])
    refused(s, deep, words="limits.max_dims")


def test_a_gradient_above_max_abs_grad_or_one_driving_state_to_inf_changes_nothing():
    s = store()
    init(s)
    refused(s, push_update(1, dense={"w": np.full((3, 4), 3e38)}), words="limits.max_abs_grad")
    # within the limit, but SGD with a huge learning rate would overflow the parameter
    big = ShardStore(ShardSpec(shard=0, num_shards=1, tables={"emb": 4}, optimizer=OptimizerConfig("sgd", lr=1e35)))
    init(big)
    refused(big, push_update(1, dense={"w": np.full((3, 4), 1e5)}), words="non-finite")
    refused(big, _rows_push(big), words="non-finite")


def _rows_push(s: ShardStore) -> ps_pb2.Update:
    u = ps_pb2.Update(worker="w", req_id=9)
    u.sparse.append(rows_to_pb("emb", np.array([3]), np.full((1, 4), 1e5), 4))
    return u


def test_one_table_twice_in_an_update_is_refused():
    s = store()
    u = push_update(1, ids=[1])
    u.sparse.append(rows_to_pb("emb", np.array([2]), np.full((1, 4), 0.1), 4))
    refused(s, u, words="appears twice")


def test_a_scalar_keeps_its_shape_through_snapshot_and_delta_and_the_checksum_sees_shapes():
    a, b = store(), store()
    init(a, "s", shape=())
    push(a, push_update(1, dense={"s": np.float32(0.5)}))
    blob, _ = a.export_state(0)
    b.import_state(blob)
    assert b.dense["s"].shape == () and b.checksum() == a.checksum()
    push(a, push_update(2, dense={"s": np.float32(0.25)}))
    delta, _ = a.export_state(b.seq)
    b.import_state(delta)
    assert b.dense["s"].shape == () and b.checksum() == a.checksum()
    push(b, push_update(3, dense={"s": np.float32(1.0)}))       # the next scalar push is taken
    c = store()
    init(c, "s", shape=(1,))
    d = store()
    init(d, "s", shape=())
    assert c.checksum() != d.checksum()


def test_the_issues_empty_full_snapshot_is_refused_and_wipes_nothing():
    s = store()
    init(s)
    push(s, push_update(1, dense={"w": np.ones((3, 4))}, ids=[1]))
    before = fingerprint(s)
    bad = b"PSB1" + (lambda h: len(h).to_bytes(4, "little") + h)(
        json.dumps({"meta": {"shard": 0, "full": True}, "arrays": []}).encode())
    with pytest.raises(InvalidArgument, match="state.meta"):
        s.import_state(bad)
    assert fingerprint(s) == before


@pytest.mark.parametrize("mutate", ["truncate", "magic", "header", "dtype", "offset", "missing-slot",
                                    "extra-array", "nan", "shape-change", "wrong-shard", "bad-applied"])
def test_malformed_state_blobs_are_refused_with_nothing_changed(mutate):
    src, dst = store(), store()
    init(src)
    init(dst)
    push(src, push_update(1, dense={"w": np.ones((3, 4))}, ids=[1, 2]))
    blob, _ = src.export_state(0)
    meta, arrays = unpack(blob)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    if mutate == "truncate":
        bad = blob[:len(blob) - 5]
    elif mutate == "magic":
        bad = b"XXXX" + blob[4:]
    elif mutate == "header":
        bad = blob[:8] + b"!" + blob[9:]
    elif mutate == "dtype":
        arrays["d/w"] = arrays["d/w"].astype(np.float64)
        bad = pack(meta, arrays)
    elif mutate == "offset":
        bad = blob.replace(b'"d/w","<f4",[3,4],0,48', b'"d/w","<f4",[3,4],999999,48')
        assert bad != blob
    elif mutate == "missing-slot":
        del arrays["ds/m/w"]
        bad = pack(meta, arrays)
    elif mutate == "extra-array":
        arrays["d/zz"] = np.zeros(2, np.float32)
        bad = pack(meta, arrays)
    elif mutate == "nan":
        arrays["d/w"][0, 0] = np.nan
        bad = pack(meta, arrays)
    elif mutate == "shape-change":
        meta = {**meta, "full": False, "base_seq": dst.seq}
        arrays["d/w"] = np.zeros((4, 3), np.float32)
        arrays.update({f"ds/{k}/w": np.zeros((4, 3), np.float32) for k in ("m", "v")})
        bad = pack(meta, arrays)
    elif mutate == "wrong-shard":
        bad = pack({**meta, "shard": 1}, arrays)
    else:
        bad = pack({**meta, "applied": {"ranges": {"w#1": [[5, 2]]}}}, arrays)
    before = fingerprint(dst)
    with pytest.raises(InvalidArgument):
        dst.import_state(bad)
    assert fingerprint(dst) == before


def test_replicated_entries_are_all_checked_before_any_is_taken():
    p, r = store(), store()
    for s in (p, r):
        init(s)
    push(p, push_update(1, dense={"w": np.ones((3, 4))}))
    good = p.log.since(r.seq)
    bad = Entry(p.seq + 1, 1, b"\x08")                       # does not parse
    wrong = Entry(p.seq + 1, 1, push_update(2, dense={"w": np.ones(5)}).SerializeToString())
    future = Entry(good[0].seq, 9, good[0].payload)          # an epoch above the sender's
    for entries in ([*good, bad], [*good, wrong], [future]):
        before = fingerprint(r)
        with pytest.raises(InvalidArgument, match="entries"):
            r.take_replicated(b"", entries, p.seq + 1, 1, False, epoch=1)
        assert fingerprint(r) == before
    assert r.take_replicated(b"", good, p.seq, 1, False, epoch=1) and r.checksum() == p.checksum()


def test_limits_come_from_the_config_and_unknown_keys_are_named():
    cfg = ClusterConfig(cluster_id="u", etcd="http://127.0.0.1:1", limits={"max_ids": 10})
    assert cfg.request_limits().max_ids == 10
    with pytest.raises(ConfigError, match="max_idz"):
        ClusterConfig(cluster_id="u", etcd="http://127.0.0.1:1", limits={"max_idz": 10})
    with pytest.raises(ConfigError, match="limits.max_ids"):
        ClusterConfig(cluster_id="u", etcd="http://127.0.0.1:1", limits={"max_ids": 0})


class FakeEtcd:
    """The shard record only: what a replica reads to confirm a new sender."""

    def __init__(self, rec: ShardRecord | None) -> None:
        self.rec = rec

    def get(self, key):
        if self.rec is None:
            return None
        return type("KV", (), {"value": self.rec.to_json().encode()})()


def replica(tmp_path, rec: ShardRecord | None) -> ShardNode:
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:1", shards=1, copies=3, workers=1,
                        workdir=str(tmp_path), optimizer={"name": "sgd", "lr": 0.1})
    node = ShardNode(cfg, "shard-0/1", dict(cfg.addresses), etcd=FakeEtcd(rec), events=EventLog(None, "shard-0/1"))
    with node.cond:
        node.follow(rec.epoch if rec else 1, rec.primary if rec else "shard-0/0", 0)
    return node


def test_replicate_is_taken_only_from_the_primary_etcd_names_at_that_epoch(tmp_path):
    rec = ShardRecord(epoch=3, primary="shard-0/0", isr=["shard-0/0", "shard-0/1", "shard-0/2"])
    node = replica(tmp_path, rec)
    for epoch, primary, words in [(3, "shard-0/2", "names shard-0/0"), (2**64 - 1, "shard-0/2", "does not exist"),
                                  (4, "shard-0/0", "does not exist")]:
        req = ps_pb2.ReplicateRequest(shard=0, epoch=epoch, primary=primary)
        with pytest.raises(StaleEpoch, match=words):
            node.replicate(req)
        assert (node.epoch, node.primary, node.role) == (3, "shard-0/0", "replica")
    rep = node.replicate(ps_pb2.ReplicateRequest(shard=0, epoch=3, primary="shard-0/0"))
    assert rep.epoch == 3
    with pytest.raises(InvalidArgument, match="shard=1"):
        node.replicate(ps_pb2.ReplicateRequest(shard=1, epoch=3, primary="shard-0/0"))
    # a promotion etcd has recorded is followed
    node.etcd.rec = ShardRecord(epoch=4, primary="shard-0/2", isr=["shard-0/2", "shard-0/1"])
    node.replicate(ps_pb2.ReplicateRequest(shard=0, epoch=4, primary="shard-0/2"))
    assert (node.epoch, node.primary) == (4, "shard-0/2")


# ---- found by the hostile review of this change --------------------------------------------


def test_a_replicate_naming_the_copy_itself_is_refused_even_after_it_stepped_down(tmp_path):
    rec = ShardRecord(epoch=3, primary="shard-0/1", isr=["shard-0/1", "shard-0/0"])
    node = replica(tmp_path, rec)
    node.become_primary(rec)
    node.lease_lost("test")                          # same epoch, no primary: the old hole
    before = fingerprint(node.store), node.role, node.epoch
    blob, _ = ShardStore(node.store.spec).export_state(0)
    with pytest.raises(StaleEpoch, match="itself"):
        node.replicate(ps_pb2.ReplicateRequest(shard=0, epoch=3, primary="shard-0/1", state=blob))
    assert (fingerprint(node.store), node.role, node.epoch) == before


def test_a_refused_replicate_from_a_confirmed_new_primary_does_not_move_the_copy(tmp_path):
    rec = ShardRecord(epoch=3, primary="shard-0/0", isr=["shard-0/0", "shard-0/1"])
    node = replica(tmp_path, rec)
    node.etcd.rec = ShardRecord(epoch=4, primary="shard-0/2", isr=["shard-0/2", "shard-0/1"])
    with pytest.raises(InvalidArgument):
        node.replicate(ps_pb2.ReplicateRequest(shard=0, epoch=4, primary="shard-0/2", state=b"PSB1junk"))
    assert (node.epoch, node.primary, node.role) == (3, "shard-0/0", "replica")


def test_pull_repeated_names_and_replies_above_the_message_limit_are_refused():
    s = store()
    init(s)
    with pytest.raises(InvalidArgument, match="repeats"):
        s.check_pull(ps_pb2.PullRequest(names=["w", "w"]))
    s.spec.max_reply_bytes = 16
    with pytest.raises(TooLarge, match="message limit"):
        s.pull_dense(0, [])


def test_an_audit_tensor_of_another_shape_is_refused():
    s = store()
    u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb("__audit__/0", np.zeros(1))])
    refused(s, u, words="audit tensor has shape [256]")


def test_a_deeply_nested_header_is_a_refusal_not_a_crash():
    s = store()
    head = b"[" * 200000 + b"]" * 200000
    bad = b"PSB1" + len(head).to_bytes(4, "little") + head
    before = fingerprint(s)
    with pytest.raises(InvalidArgument, match="RecursionError"):
        s.import_state(bad)
    assert fingerprint(s) == before


def test_a_malformed_retry_of_an_applied_key_is_refused_not_answered_duplicate(tmp_path):
    import time as _time

    node = replica(tmp_path, None)
    node.become_primary(ShardRecord(epoch=1, primary="shard-0/1", isr=["shard-0/1"]))
    node.cfg.mode = "async"
    node.cfg.min_isr = 1
    init_u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb("w", np.zeros(4))])
    node.push(ps_pb2.PushRequest(shard=0, update=init_u), _time.monotonic() + 1)
    good = push_update(1, dense={"w": np.ones(4)})
    node.push(ps_pb2.PushRequest(shard=0, update=good), _time.monotonic() + 1)
    bad = push_update(1, dense={"w": np.ones(5)})              # same key, wrong shape
    with pytest.raises(InvalidArgument):
        node.push(ps_pb2.PushRequest(shard=0, update=bad), _time.monotonic() + 1)


def test_only_one_snapshot_call_at_a_time(tmp_path):
    node = replica(tmp_path, None)
    assert node.snapshot_slot.acquire(blocking=False)        # another call is taking one
    with pytest.raises(TooLarge, match="already taking a snapshot"):
        node.snapshot(ps_pb2.SnapshotRequest(shard=0))
    node.snapshot_slot.release()
    assert node.snapshot(ps_pb2.SnapshotRequest(shard=0))["seq"] == 0


def test_server_waits_are_capped_whatever_deadline_the_client_asks():
    import time as _time

    from pschaos.psnodes.server.calls import MAX_WAIT_S, deadline_of

    class Ctx:
        def time_remaining(self):
            return 1e5
    assert deadline_of(Ctx(), 2.0) - _time.monotonic() <= MAX_WAIT_S


def test_limits_refuse_an_unbounded_gradient_limit():
    with pytest.raises(ConfigError, match="max_abs_grad"):
        ClusterConfig(cluster_id="u", etcd="http://127.0.0.1:1", limits={"max_abs_grad": float("inf")})


def test_a_clock_that_would_not_survive_a_snapshot_is_refused():
    s = store()
    init(s)
    refused(s, push_update(1, dense={"w": np.ones((3, 4))}, clock=2**63 - 1), words="update.clock")
    push(s, push_update(2, dense={"w": np.ones((3, 4))}, clock=2**62 - 1))
    b = store()
    b.import_state(s.export_state(0)[0])             # the highest clock taken still loads
    assert b.checksum() == s.checksum()
