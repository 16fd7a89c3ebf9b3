"""Applied-key set, update log, blob format, placement, embedding initializer, etcd keys."""
import numpy as np
import pytest

from pschaos.psnodes.store.applied import AppliedSet, idem_key
from pschaos.psnodes.store.blob import pack, unpack
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.store.embedding import init_rows
from pschaos.psnodes.errors import ConfigError
from pschaos.psnodes.placement import audit_name, dense_shard, is_audit, node_name, parse_node_name, row_shards
from pschaos.psnodes.store.updatelog import Entry, UpdateLog


def test_applied_set_merges_intervals_and_remembers_recent_seqs():
    a = AppliedSet(recent_capacity=3)
    for r in [1, 2, 3, 7, 5, 6, 4]:
        a.add("w", r, r * 10)
    assert a.ranges["w"] == [[1, 7]]
    assert a.contains("w", 4) and not a.contains("w", 8) and not a.contains("x", 1)
    assert a.seq_of("w", 4) == 40 and a.seq_of("w", 1) == 0   # evicted from the recent window
    assert a.count() == 7


def test_applied_set_json_delta_keeps_recent_after_since():
    a = AppliedSet()
    for r in range(1, 6):
        a.add("w", r, r)
    b = AppliedSet()
    b.merge_json(a.to_json(since=3))
    assert b.ranges == a.ranges and b.seq_of("w", 5) == 5 and b.seq_of("w", 2) == 0


def test_idempotency_key_names_the_process_and_keeps_incarnations_apart():
    assert idem_key("worker-0", 1712345678901234) == "worker-0#1712345678901234"
    a = AppliedSet()
    for r in (1, 2, 3):
        a.add(idem_key("worker-0", 1), r, r)
    a.add(idem_key("worker-0", 2), 1, 4)       # the restarted process's first push
    assert not a.contains(idem_key("worker-0", 2), 2) and a.contains(idem_key("worker-0", 1), 2)
    assert a.ranges == {"worker-0#1": [[1, 3]], "worker-0#2": [[1, 1]]}


def test_applied_set_stays_small_on_a_long_run():
    """Bug 4.7: per-shard ids make one interval per process; the retry window is per process, so
    what a delta or checkpoint carries does not grow with the run."""
    a = AppliedSet()
    for r in range(1, 5001):
        a.add(idem_key("worker-0", 1), r, 2 * r)
        a.add(idem_key("worker-1", 1), r, 2 * r + 1)
    assert a.intervals() == 2 and a.count() == 10_000
    full = a.to_json(0)
    assert {k: len(v) for k, v in full["recent"].items()} == {"worker-0#1": 16, "worker-1#1": 16}
    assert a.to_json(9_990)["recent"] == {"worker-0#1": [[4996, 9992], [4997, 9994], [4998, 9996],
                                                         [4999, 9998], [5000, 10000]],
                                          "worker-1#1": [[4995, 9991], [4996, 9993], [4997, 9995],
                                                         [4998, 9997], [4999, 9999], [5000, 10001]]}
    b = AppliedSet()
    b.merge_json(full)
    assert b.ranges == a.ranges and b.seq_of("worker-0#1", 5000) == 10000
    c = AppliedSet()
    c.merge_json({"ranges": {"w#0": [[1, 2]]}, "recent": [["w#0", 1, 5], ["w#0", 2, 6]]})   # older form
    assert c.seq_of("w#0", 1) == 5 and c.seq_of("w#0", 2) == 6


def test_update_log_bounds_and_since():
    log = UpdateLog(max_entries=3)
    for s in range(1, 6):
        log.append(Entry(s, 1 if s < 4 else 2, b"x" * s))
    assert log.base_seq == 2 and log.last_seq == 5
    assert log.since(1) is None                          # no longer reaches back
    assert [e.seq for e in log.since(2)] == [3, 4, 5]
    assert [e.seq for e in log.since(3, max_bytes=4)] == [4]
    assert log.since(5) == [] and log.epoch_at(4) == 2 and log.epoch_at(2) == 1 and log.epoch_at(1) is None


def test_blob_roundtrip_and_bad_magic():
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2], dtype=np.int64)}
    meta, got = unpack(pack({"x": 1}, arrays))
    assert meta == {"x": 1}
    for k in arrays:
        np.testing.assert_array_equal(got[k], arrays[k])
    with pytest.raises(ValueError, match="magic"):
        unpack(b"nope")


def test_placement_is_stable_and_spreads():
    assert dense_shard("layer.0.weight", 4) == dense_shard("layer.0.weight", 4)
    shards = row_shards("emb", np.arange(10_000), 4)
    counts = np.bincount(shards, minlength=4)
    assert counts.min() > 2000
    assert (row_shards("emb", np.arange(100), 4) == row_shards("emb", np.arange(100), 4)).all()
    assert parse_node_name(node_name(3, 2)) == (3, 2)


def test_audit_tensors_are_pinned_to_their_shard():
    assert [dense_shard(audit_name(s), 4) for s in range(4)] == [0, 1, 2, 3]
    assert is_audit(audit_name(0)) and not is_audit("audit") and not is_audit("layer.__audit__/0")
    assert dense_shard("__audit__/x", 4) == dense_shard("__audit__/x", 4)   # not a shard number: hashed
    with pytest.raises(ValueError, match="shard-<i>/<r>"):
        parse_node_name("worker-1")


def test_embedding_init_is_deterministic_and_bounded():
    a = init_rows(1, "emb", np.array([5, 9]), 8)
    assert np.array_equal(a, init_rows(1, "emb", np.array([5, 9]), 8))
    assert not np.array_equal(a, init_rows(2, "emb", np.array([5, 9]), 8))
    assert np.abs(a).max() <= 1 / np.sqrt(8) and a.std() > 0


def test_cluster_config_checks_fields(tmp_path):
    with pytest.raises(ConfigError, match="mode='quorum'"):
        ClusterConfig(cluster_id="c", etcd="http://127.0.0.1:1", mode="quorum")
    with pytest.raises(ConfigError, match="copies=0"):
        ClusterConfig(cluster_id="c", etcd="http://127.0.0.1:1", copies=0)
    p = tmp_path / "c.json"
    p.write_text('{"cluster_id": "c", "etcd": "x", "bogus": 1}')
    with pytest.raises(ConfigError, match="unknown field"):
        ClusterConfig.load(p)


def test_device_auto_and_missing_cuda():
    import torch

    from pschaos.psnodes.models import make_task, pick_device

    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            pick_device("cuda")
    with pytest.raises(ValueError, match="model='gpt'"):
        make_task("gpt", 0, torch.device("cpu"))


def test_process_backend_implements_the_adapter(tmp_path):
    from pschaos.harness.backends.base import Backend
    from pschaos.harness.backends.process.backend import ProcessBackend
    from pschaos.harness.backends.cluster import ClusterSpec

    be = ProcessBackend(ClusterSpec(), tmp_path, "r", 1)
    be.cfg = be.net = None
    assert isinstance(be, Backend)


def test_progress_bar_in_a_terminal_and_lines_in_ci():
    import io

    from pschaos.harness.run.progress import Progress

    tty, plain = io.StringIO(), io.StringIO()
    for out, is_tty in ((tty, True), (plain, False)):
        p = Progress("kill-primary", 300, stream=out, tty=is_tty)
        p.update("training", 150, 1)
        p.note("fault: kill shard-0/0 at step 150")
        p.update("judging")
        p.close()
    assert "\r[############............] kill-primary training  step 150/300 faults 1" in tty.getvalue()
    lines = plain.getvalue().splitlines()
    assert "\r" not in plain.getvalue()
    assert "[pschaos] kill-primary: training, step 150/300, faults so far 1, t=0s" in lines
    assert "[pschaos] fault: kill shard-0/0 at step 150" in lines and any("judging" in x for x in lines)


def test_ports_are_never_handed_out_twice(tmp_path, monkeypatch):
    from pschaos.harness.machinery import ports

    monkeypatch.setattr(ports, "RESERVED", tmp_path)
    a, b = ports.free_ports(30), ports.free_ports(30)
    assert len(set(a) | set(b)) == 60
    assert all(p < ports._ephemeral()[0] or p > ports._ephemeral()[1] for p in a + b)


def test_member_ttl_and_poll_are_checked_naming_the_field():
    for bad in (0, 1.5, True, "2", 3601):
        with pytest.raises(ConfigError, match="member_ttl_s=.*whole number of seconds"):
            ClusterConfig(cluster_id="c", etcd="http://127.0.0.1:1", member_ttl_s=bad)
    for bad in (0, -0.1, 2, 5.0, "0.1"):
        with pytest.raises(ConfigError, match="member_poll_s=.*under member_ttl_s=2"):
            ClusterConfig(cluster_id="c", etcd="http://127.0.0.1:1", member_ttl_s=2, member_poll_s=bad)
    assert ClusterConfig(cluster_id="c", etcd="x", member_ttl_s=1, member_poll_s=0.05).member_ttl_s == 1

    for field, bad, words in [("member_margin_s", 1.0, "under half of member_ttl_s=2"),
                              ("member_margin_s", -0.1, "under half"), ("member_join_grace_s", 0, "> 0"),
                              ("member_join_timeout_s", "30", "> 0"), ("barrier", "yes", "true or false")]:
        with pytest.raises(ConfigError, match=f"{field}=.*{words}"):
            ClusterConfig(cluster_id="c", etcd="x", **{field: bad})


def test_the_scenario_says_whether_nodes_keep_membership():
    from pschaos.harness.backends.cluster import ClusterSpec

    assert ClusterSpec(training="async").membership_config()["barrier"] is False
    cfg = ClusterSpec(training="ssp", member_join_grace_s=5, member_join_timeout_s=7).membership_config()
    assert cfg == {"barrier": True, "member_ttl_s": 2, "member_join_grace_s": 5, "member_join_timeout_s": 7}
    assert ClusterConfig(cluster_id="c", etcd="x", **cfg).member_join_grace_s == 5
