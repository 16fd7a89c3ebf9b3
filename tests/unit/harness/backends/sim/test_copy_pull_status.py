"""The twin's Pull and Status: ShardNode.pull and ShardNode.status on a simulated copy.

One shard, 3 copies, sync mode, one worker that pushes steps 0.. until t=1. Then, at fixed
virtual times: a dense pull of everything (since_seq 0), one since the reply's seq (nothing
changed), one more push, pulls since before it (all of it, and by name), rows of an embedding
table (the store's seeded init rows), a BSP pull that waits for the next step's push, one that
times out, and the refusals (replica, wrong shard, unknown table).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from pschaos.psnodes.wire.codec import tensor_from_pb
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.store.digest import dense_digest
from pschaos.psnodes.errors import InvalidArgument, NotPrimary, Timeout
from pschaos.psnodes.placement import audit_name
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.store.store import ShardStore
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen, call

CFG = dict(cluster_id="sim", etcd="sim://etcd", shards=1, copies=3, workers=1, mode="sync", seed=7,
           tables={"emb": 4})


def pull(cl: SimShardCluster, req: ps_pb2.PullRequest, node: str | None = None, timeout: float = 2.0) -> Gen:
    """A worker's Pull over the simulated network to the primary the record names (or `node`)."""
    rec = ShardRecord.from_json(cl.etcd.get(cl.cfg.shard_key(0)).value)
    name = node or rec.primary
    req.epoch = req.epoch or rec.epoch
    dst = cl.copies[name]
    deadline = cl.env.now + timeout
    raw = yield from call(cl.net, "worker-0", name, lambda: dst.alive, lambda: dst.pull(req, deadline - 0.02),
                          req.ByteSize(), len, deadline)
    return ps_pb2.PullReply.FromString(raw)


def dense(reply: ps_pb2.PullReply) -> dict[str, np.ndarray]:
    return {t.name: tensor_from_pb(t) for t in reply.dense}


@pytest.fixture(scope="module")
def run() -> dict:
    cl = SimShardCluster(7, ClusterConfig(**CFG))
    client = cl.client()
    cl.env.process(client.run(until=1.0))
    out: dict = {"cl": cl}

    def attempt(key: str, gen: Gen) -> Gen:
        try:
            out[key] = yield from gen
        except Exception as e:  # noqa: BLE001 - the refusal is the finding
            out[key] = e
        out[key + "_t"] = cl.env.now

    def scenario() -> Gen:
        yield from cl.clock.sleep(1.5)
        prim = cl.copies[cl.primary().name]
        out["store_w"] = prim.store.dense["w"].copy()
        yield from attempt("all", pull(cl, ps_pb2.PullRequest(shard=0, since_seq=0)))
        seq = out["all"].seq
        yield from attempt("none", pull(cl, ps_pb2.PullRequest(shard=0, since_seq=seq)))
        out["step"] = step = prim.store.clocks["worker-0"]
        yield from attempt("push", client.push(step))
        yield from attempt("since", pull(cl, ps_pb2.PullRequest(shard=0, since_seq=seq)))
        yield from attempt("named", pull(cl, ps_pb2.PullRequest(shard=0, since_seq=seq, names=["w"])))
        ids = np.array([1, 5, 9], "<i8")
        yield from attempt("rows", pull(cl, ps_pb2.PullRequest(shard=0, no_dense=True, sparse=[
            ps_pb2.Rows(table="emb", ids=ids.tobytes())])))
        yield from attempt("replica", pull(cl, ps_pb2.PullRequest(shard=0), node="shard-0/1"))
        yield from attempt("shard", pull(cl, ps_pb2.PullRequest(shard=1)))
        yield from attempt("table", pull(cl, ps_pb2.PullRequest(shard=0, sparse=[ps_pb2.Rows(table="nope")])))
        yield from attempt("late", pull(cl, ps_pb2.PullRequest(shard=0, min_clock=step + 3, worker="worker-0"), timeout=0.5))
        out["bsp_start"] = cl.env.now
        cl.env.process(attempt("push2", later(0.3, step + 1)))
        yield from attempt("bsp", pull(cl, ps_pb2.PullRequest(shard=0, min_clock=step + 2, since_seq=10**9,
                                                                 worker="worker-0")))
        out["status"] = prim.status(ps_pb2.StatusRequest(checksum=True, applied=True, audit=True))
        out["status_replica"] = cl.copies["shard-0/2"].status(ps_pb2.StatusRequest())

    def later(s: float, step: int) -> Gen:
        yield from cl.clock.sleep(s)
        return (yield from client.push(step))

    cl.env.process(scenario())
    cl.env.run(until=5.0)
    return out


def test_a_dense_pull_since_zero_is_every_tensor_at_the_primarys_seq(run) -> None:
    cl, r = run["cl"], run["all"]
    assert r.node == "shard-0/0" and r.epoch == 1 and r.seq == run["status"].seq - 2
    got = dense(r)
    assert sorted(got) == sorted(["w", audit_name(0)])
    np.testing.assert_array_equal(got["w"], run["store_w"])
    assert got[audit_name(0)][0] == r.seq - 1        # every push but the INIT counted once
    assert r.bytes > 0 and run["none"].seq == r.seq and not run["none"].dense


def test_since_seq_returns_only_what_changed_after_it(run) -> None:
    assert run["push"].seq == run["all"].seq + 1
    assert sorted(dense(run["since"])) == sorted(["w", audit_name(0)]) and run["since"].seq == run["push"].seq
    assert list(dense(run["named"])) == ["w"]


def test_a_delta_pull_carries_the_digest_of_the_state_the_full_pull_and_delta_assemble(run) -> None:
    assert not run["all"].HasField("state_crc") and not run["named"].HasField("state_crc")
    assert not run["rows"].HasField("state_crc")
    assert run["since"].HasField("state_crc") and run["none"].HasField("state_crc")
    assert run["none"].state_crc == dense_digest(dense(run["all"]))          # nothing changed
    assert run["since"].state_crc == dense_digest({**dense(run["all"]), **dense(run["since"])})


def test_rows_are_the_tables_rows_for_the_checked_ids(run) -> None:
    (rows,) = run["rows"].sparse
    assert not run["rows"].dense and rows.table == "emb" and rows.dim == 4
    ids = np.frombuffer(rows.ids, "<i8")
    assert ids.tolist() == [1, 5, 9]
    fresh = ShardStore(run["cl"].copies["shard-0/0"].store.spec)     # same seed: the same init rows
    np.testing.assert_array_equal(np.frombuffer(rows.data, "<f4").reshape(3, 4), fresh.tables["emb"].lookup(ids))


def test_refusals_as_the_real_node_words_them(run) -> None:
    assert isinstance(run["replica"], NotPrimary)
    assert isinstance(run["shard"], InvalidArgument) and "serves shard 0" in str(run["shard"])
    assert isinstance(run["table"], InvalidArgument) and "unknown table" in str(run["table"])
    assert isinstance(run["late"], Timeout) and "BSP/SSP wait timed out" in str(run["late"])


def test_a_bsp_pull_waits_for_the_slowest_workers_push(run) -> None:
    push2, bsp = run["push2"], run["bsp"]
    assert push2.seq == run["push"].seq + 1
    assert bsp.seq == push2.seq and not bsp.dense
    assert run["bsp_start"] + 0.3 < run["bsp_t"] < run["bsp_start"] + 0.32       # woken by that push
    assert abs(run["push2_t"] - run["bsp_t"]) < 0.001          # both answered once it was replicated


def test_status_reports_role_seq_isr_and_the_final_state_fields(run) -> None:
    st, cl = run["status"], run["cl"]
    prim = cl.copies["shard-0/0"]
    assert (st.node, st.shard, st.role, st.epoch) == ("shard-0/0", 0, "primary", 1)
    assert st.seq == prim.store.seq and st.seq_epoch == 1 and list(st.isr) == cl.cfg.shard_nodes(0)
    assert st.checksum == prim.store.checksum() and st.pushes == st.seq - 1 and st.restored_from == ""
    assert json.loads(st.applied_json) == {"worker-0#1": [[1, st.pushes]]}
    assert json.loads(st.audit_json) == {"worker-0": st.pushes}
    rep = run["status_replica"]
    assert (rep.role, rep.epoch, rep.seq, rep.checksum) == ("replica", 1, st.seq, "")
