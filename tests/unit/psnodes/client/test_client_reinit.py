"""Bug 4.9: an async failover can lose a not-yet-replicated INIT. A push that then meets
NOT_FOUND makes the client re-offer INIT (set-if-absent) of the worker's current values and
retry the push under the same idempotency key, instead of only recording an error."""
import json

import numpy as np

from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.store import ShardStore

from tests.unit import inproc


def events(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def lose_everything(node) -> None:
    """The new primary after an async failover that never received the INIT."""
    with node.cond:
        node.store = ShardStore(node.store.spec)


def test_push_after_a_lost_init_reinits_and_applies_once(tmp_path):
    ip = inproc.start(tmp_path, mode="async")
    try:
        log = tmp_path / "worker-0.jsonl"
        c = ip.client("worker-0", events=log)
        current = {"w": np.full(4, 2.0, np.float32)}
        c.current_values = lambda: current
        c.init_dense({"w": np.zeros(4, np.float32)})
        assert c.push({"w": np.ones(4)}, {}, clock=0)[0] is not None
        node = ip.nodes[0]
        lose_everything(node)
        rep = c.push({"w": np.ones(4)}, {}, clock=1)[0]
        assert rep is not None and not rep.duplicate
        st = node.status(ps_pb2.StatusRequest(audit=True, applied=True))
        assert json.loads(st.audit_json) == {"worker-0": 1} and st.pushes == 1
        assert json.loads(st.applied_json) == {f"worker-0#{c.incarnation}": [[2, 2]]}   # the same key
        w = node.store.dense["w"]
        assert np.all(w < 2.0) and np.all(w > 1.9)           # re-INIT took the worker's current values
        ev = events(log)
        assert [e["value"]["shard"] for e in ev if e["f"] == "reinit"] == [0]
        pushes = [e for e in ev if e["f"] == "push"]
        assert [e["type"] for e in pushes] == ["invoke", "ok", "invoke", "ok"]
        assert all(e["value"]["incarnation"] == c.incarnation for e in pushes)
    finally:
        ip.close()


def test_without_current_values_the_audit_tensor_still_comes_back(tmp_path):
    """A client that only pushes clock ticks needs nothing but the audit tensor re-offered."""
    ip = inproc.start(tmp_path, mode="async")
    try:
        c = ip.client("worker-1")
        c.init_dense({})
        lose_everything(ip.nodes[0])
        assert c.push({}, {}, clock=3)[0] is not None
        st = ip.nodes[0].status(ps_pb2.StatusRequest(audit=True))
        assert json.loads(st.audit_json) == {"worker-1": 1}
        assert ip.nodes[0].store.clocks == {"worker-1": 4}
    finally:
        ip.close()


def test_a_tensor_nobody_can_offer_still_fails_definitely(tmp_path):
    ip = inproc.start(tmp_path, mode="async")
    try:
        log = tmp_path / "worker-0.jsonl"
        c = ip.client("worker-0", events=log)
        c.init_dense({"w": np.zeros(4, np.float32)})
        lose_everything(ip.nodes[0])
        assert c.push({"w": np.ones(4)}, {}, clock=0)[0] is None
        assert [e["type"] for e in events(log) if e["f"] == "push"] == ["invoke", "fail"]
    finally:
        ip.close()
