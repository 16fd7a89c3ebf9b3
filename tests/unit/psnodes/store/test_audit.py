"""The audit tensor (the harness's independent oracle) and the per-process idempotency key.

`__audit__/<s>` counts, per worker slot, the pushes a copy applied: retries and duplicates must
not add to it, it must survive every way state moves (log, delta, snapshot, checkpoint), and it
is plain SGD with lr 1 whatever the optimizer.
"""
import json

import numpy as np
import pytest

from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.placement import AUDIT_SLOTS, audit_name
from pschaos.psnodes.proto import ps_pb2

from tests.unit import inproc
from tests.unit.helpers import init, push, push_update, store


def audit_init(s, shard: int = 0) -> int:
    u = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[tensor_to_pb(audit_name(shard), np.zeros(AUDIT_SLOTS))])
    return s.apply(s.validate(u), u.SerializeToString(), 1)


def audited(req_id: int, worker: str = "worker-0", incarnation: int = 7, shard: int = 0, **kw) -> ps_pb2.Update:
    u = push_update(req_id, worker=worker, **kw)
    u.incarnation = incarnation
    g = np.zeros(AUDIT_SLOTS, np.float32)
    g[int(worker.rsplit("-", 1)[1])] = -1.0
    u.dense.append(tensor_to_pb(audit_name(shard), g))
    return u


def apply_once(s, u: ps_pb2.Update) -> bool:
    """What the node does: apply unless the key was applied. True when applied."""
    if s.duplicate_seq(u) is not None:
        return False
    push(s, u)
    return True


@pytest.mark.parametrize("opt", ["adam", "adagrad", "sgd"])
def test_audit_counts_distinct_pushes_whatever_the_optimizer(opt):
    s = store(opt)
    init(s)
    assert s.audit_counts() is None                       # no audit tensor yet: "" in Status
    audit_init(s)
    assert s.audit_counts() == {} and s.dense_slots[audit_name(0)] == {}
    sent = [audited(r, dense={"w": np.full((3, 4), 0.1)}) for r in range(1, 31)]
    sent += [audited(r, worker="worker-1", ids=[r]) for r in range(1, 12)]
    sent += sent[:5] + sent[-3:]                          # retries of applied keys
    sent += [audited(r, incarnation=8) for r in (1, 2)]   # worker-0 restarted: new keys
    applied = sum(apply_once(s, u) for u in sent)
    assert applied == s.pushes == 30 + 11 + 2
    assert s.audit_counts() == {"worker-0": 32, "worker-1": 11}
    assert s.dense[audit_name(0)].dtype == np.float32


def test_audit_survives_log_delta_full_state_and_checksums_match():
    a = store()
    init(a)
    audit_init(a)
    for r in range(1, 21):
        push(a, audited(r, ids=[r, 1000 + r], dense={"w": np.full((3, 4), 0.01 * r)}))
    replica = store()
    for e in a.log.since(0):
        replica.apply_entry(e)
    assert replica.checksum() == a.checksum() and replica.audit_counts() == {"worker-0": 20}
    snap, _ = a.export_state(0)
    base = a.seq
    for r in range(21, 26):
        push(a, audited(r, worker="worker-1", ids=[r]), epoch=2)
    delta, changed = a.export_state(base)
    full, _ = a.export_state(0)
    for blob, start in ((delta, snap), (full, None)):
        b = store()
        if start is not None:
            b.import_state(start)
        b.import_state(blob)
        assert b.checksum() == a.checksum()
        assert b.audit_counts() == {"worker-0": 20, "worker-1": 5} and b.dense_slots[audit_name(0)] == {}


def test_audit_survives_a_checkpoint(tmp_path):
    ip = inproc.start(tmp_path)                            # only for its config and node
    try:
        node = ip.nodes[0]
        init(node.store)
        audit_init(node.store)
        for r in range(1, 6):
            push(node.store, audited(r, ids=[r]))
        node.checkpoint(shared=False)
        again = ShardNode(ip.cfg, node.name, dict(ip.cfg.addresses), etcd=None, events=EventLog(None, node.name))
        again.load_local()
        assert again.store.audit_counts() == {"worker-0": 5}
        assert again.store.checksum() == node.store.checksum()
    finally:
        ip.close()


def test_node_acks_a_retry_as_duplicate_and_a_restarted_worker_as_new(tmp_path):
    """Bug 4.1 end to end through gRPC: a new PSClient (new process) starting at req_id 1 is
    applied; the same request sent twice is applied once."""
    ip = inproc.start(tmp_path, shards=2)
    try:
        c = ip.client()
        c.init_dense({"w": np.zeros(4, np.float32)})
        for _ in range(3):
            assert all(r is not None and not r.duplicate for r in c.push({"w": np.ones(4)}, {}, clock=0).values())
        upd = ps_pb2.Update(worker="worker-0", incarnation=c.incarnation, req_id=3, clock=0)
        shard = next(s for s in ip.nodes if "w" in ip.nodes[s].store.dense)
        again = c.call(shard, "Push", lambda ep: ps_pb2.PushRequest(shard=shard, epoch=ep, update=upd))
        assert again.duplicate                             # a retry: nothing applied twice
        restarted = ip.client()                            # same name, new incarnation, ids from 1
        assert restarted.incarnation != c.incarnation
        replies = restarted.push({"w": np.ones(4)}, {}, clock=0)
        assert all(r is not None and not r.duplicate for r in replies.values())
        for s, node in ip.nodes.items():
            st = node.status(ps_pb2.StatusRequest(audit=True, applied=True))
            assert json.loads(st.audit_json) == {"worker-0": 4} and st.pushes == 4
            assert json.loads(st.applied_json) == {f"worker-0#{c.incarnation}": [[1, 3]],
                                                   f"worker-0#{restarted.incarnation}": [[1, 1]]}
    finally:
        ip.close()


def test_request_ids_count_per_shard_so_each_shard_keeps_one_interval(tmp_path):
    """Bug 4.7: with one counter across shards every key was its own interval."""
    ip = inproc.start(tmp_path, shards=3)
    try:
        c = ip.client()
        names = {f"p{i}": np.zeros(2, np.float32) for i in range(12)}
        c.init_dense(names)
        rng = np.random.default_rng(0)
        for step in range(40):                             # each push touches a random subset of shards
            some = {n: np.ones(2) for n in names if rng.random() < 0.3}
            c.push(some, {}, clock=-1)
        for node in ip.nodes.values():
            ranges = node.store.applied.ranges
            assert list(ranges.values()) in ([], [[[1, node.store.pushes]]]), ranges
            counts = node.store.audit_counts()
            assert counts == ({"worker-0": node.store.pushes} if node.store.pushes else {})
    finally:
        ip.close()


def test_status_audit_is_empty_without_the_tensor(tmp_path):
    ip = inproc.start(tmp_path)
    try:
        st = ip.nodes[0].status(ps_pb2.StatusRequest(audit=True))
        assert st.audit_json == ""
    finally:
        ip.close()
