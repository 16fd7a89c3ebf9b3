"""The client records, on every delta pull, the server's state digest beside the digest of its own
copy after the delta (pschaos.psnodes.store.digest); real gRPC around a ShardNode, so node.py's reply is the one
judged. A cursor naming a state the server no longer holds leaves the copy behind: the digests differ."""
import json

import numpy as np

from pschaos.psnodes.store.store import ShardStore

from tests.unit import inproc


def pulls(path):
    evs = map(json.loads, path.read_text().splitlines())
    return [e["value"] for e in evs if e["f"] == "pull" and e["type"] == "ok"]


def test_delta_pulls_carry_equal_digests_and_a_stale_cursor_shows_as_a_mismatch(tmp_path):
    ip = inproc.start(tmp_path, mode="async", optimizer="sgd")
    try:
        log = tmp_path / "worker-0.jsonl"
        c = ip.client("worker-0", events=log)
        c.init_dense({"w": np.zeros(4, np.float32), "b": np.zeros(2, np.float32)})
        c.push({"w": np.ones(4, np.float32), "b": np.ones(2, np.float32)}, {}, clock=0)
        c.pull_dense()                                            # full: the copy is the reply
        c.push({"w": np.ones(4, np.float32)}, {}, clock=1)         # b unchanged: the delta leaves it out
        got = c.pull_dense()
        assert "b" not in got.dense and "w" in got.dense
        full, delta = pulls(log)
        assert "state_crc" not in full and full["since"] == 0
        assert delta["since"] == full["seq"] and delta["state_crc"] == delta["copy_crc"]

        # the shard's history is rewritten below the client's cursor (what a failover that lost an
        # unreplicated tail does), and the client keeps the cursor: nothing comes back
        node = ip.nodes[0]
        with node.cond:
            node.store = ShardStore(node.store.spec)
        c.init_dense({"w": np.full(4, 5, np.float32), "b": np.full(2, 5, np.float32)})
        assert c.pull_dense().dense == {}
        stale = pulls(log)[-1]
        assert stale["since"] > stale["seq"] and stale["state_crc"] != stale["copy_crc"]
        c.versions.clear()                                        # a fresh cursor: full pull, then equal again
        c.pull_dense()
        c.push({"w": np.ones(4, np.float32)}, {}, clock=2)
        c.pull_dense()
        again = pulls(log)[-1]
        assert again["since"] > 0 and again["state_crc"] == again["copy_crc"]
    finally:
        ip.close()


def test_a_cursor_answered_at_another_epoch_is_not_taken_as_a_delta(tmp_path):
    """A client whose route is stale (etcd unreachable) keeps its cursor, since its route's epoch is
    the cursor's; the node answering was restored below that cursor and promoted at a higher epoch.
    The client must not take the reply as a delta of the history its cursor names: it pulls whole."""
    from pschaos.psnodes.config import ShardRecord

    ip = inproc.start(tmp_path, mode="async", optimizer="sgd")
    try:
        log = tmp_path / "worker-0.jsonl"
        c = ip.client("worker-0", events=log)
        c.init_dense({"w": np.zeros(4, np.float32), "b": np.zeros(2, np.float32)})
        for k in range(3):
            c.push({"w": np.ones(4, np.float32), "b": np.ones(2, np.float32)}, {}, clock=k)
        c.pull_dense()
        node = ip.nodes[0]
        with node.cond:                                  # restored below the cursor, at a new epoch
            node.store = ShardStore(node.store.spec)
        node.become_primary(ShardRecord(epoch=2, primary=node.name, isr=[node.name]))
        c.init_dense({"w": np.full(4, 5, np.float32), "b": np.full(2, 5, np.float32)})
        got = c.pull_dense()
        last = pulls(log)[-1]
        assert last["epoch"] == 2 and last["since"] == 0, last
        assert "state_crc" not in last or last["state_crc"] == last["copy_crc"]
        assert np.array_equal(got.dense["w"], np.full(4, 5, np.float32))
    finally:
        ip.close()
