"""Checkpoints in the twin: the simulated disk's manifest semantics (psnodes/store/checkpoint.py) and a
kill in the middle of the primary's shared checkpoint write.

The disk: a write takes fsync + bytes / rate virtual seconds and is listed by
`checkpoint_writes` meanwhile; the shared folder only moves to a newer (term, epoch, seq), a
local one is replaced whatever it held; a wiped folder fails the write in progress.

The kill: one shard, 3 copies, sync mode, a slow disk (2 KB/s: a ~1.7 KB state takes ~0.8 s);
the primary's periodic writer publishes the shared checkpoint; during its second shared write
the primary is killed. The write is caught in progress (as the kill fault checks), the manifest
stays the previous one, the temporary file stays behind (`stray_tmp`), and the next primary
publishes its own checkpoint at its term.
"""
from __future__ import annotations

import pytest
import simpy

from pschaos.harness.backends.sim.clock import SimClock
from pschaos.harness.backends.sim.disk import DiskCalibration, SimDisk, shared_dir
from pschaos.harness.backends.sim.pushclient import SimShardCluster
from pschaos.harness.backends.sim.rpc import Gen
from pschaos.psnodes.store.state import ShardSpec
from pschaos.psnodes.store.store import ShardStore

KILL_AFTER, END = 4.0, 12.0


def blob(seq: int = 0) -> bytes:
    store = ShardStore(ShardSpec(shard=0, num_shards=1, tables={}))
    store.seq = seq
    return store.export_state(0)[0]


def drive(env: simpy.Environment, gen: Gen) -> dict:
    out: dict = {}

    def proc() -> Gen:
        try:
            out["got"] = yield from gen
        except Exception as e:  # noqa: BLE001
            out["got"] = e
        out["t"] = env.now
    env.process(proc())
    return out


def test_a_write_takes_its_time_is_listed_meanwhile_and_then_named_by_the_manifest() -> None:
    env = simpy.Environment()
    disk = SimDisk(env, SimClock(env), {"disk_write_mb_s": 0.001, "disk_fsync_s": 0.002, "rto_s": 1})
    b = blob(5)
    w = drive(env, disk.write("checkpoints/shard-0", b, 5, 1, "shard-0/0", term=1, writer="w"))
    assert len(b) > 100
    env.run(until=0.1)
    (tmp,) = disk.checkpoint_writes("shard-0/0")
    assert tmp == "checkpoints/shard-0/state-t1-000000000005-e1-shard-0-0.psb.w-0.tmp"
    assert disk.manifest("checkpoints/shard-0") is None and disk.checkpoint_scan() == []
    env.run()
    assert w["t"] == pytest.approx(0.002 + len(b) / 1000 + 0.002)
    man, wrote = w["got"]
    assert wrote and man["seq"] == 5 and man["bytes"] == len(b) and disk.checkpoint_writes("shard-0/0") == []
    assert disk.read("checkpoints/shard-0") == (man, b)
    assert disk.checkpoint_scan() == [{"dir": "checkpoints/shard-0", "stray_tmp": [], "seq": 5,
                                       "file": man["file"], "size_ok": True, "loadable": True}]
    assert disk.checkpoint_writes("worker-0") == [] and disk.checkpoint_writes("etcd") == []


def test_the_shared_folder_only_moves_forward_and_a_local_one_always_does() -> None:
    env = simpy.Environment()
    disk = SimDisk(env)
    first = drive(env, disk.write("checkpoints/shard-0", blob(9), 9, 1, "shard-0/1", term=2))
    env.run()
    old_term = drive(env, disk.write("checkpoints/shard-0", blob(20), 20, 1, "shard-0/0", term=1))
    local = drive(env, disk.write("data/shard-0-0", blob(20), 20, 1, "shard-0/0", term=1))
    env.run()
    assert old_term["got"] == (first["got"][0], False)               # (term 1, ..) < (term 2, ..): kept
    assert disk.manifest("checkpoints/shard-0")["node"] == "shard-0/1"
    local2 = drive(env, disk.write("data/shard-0-0", blob(3), 3, 1, "shard-0/0", term=1, newer_only=False))
    env.run()
    assert local["got"][1] and local2["got"][1] and disk.manifest("data/shard-0-0")["seq"] == 3
    assert sorted(disk.folders["data/shard-0-0"].files) == ["manifest.json", local2["got"][0]["file"]]


def test_a_wipe_under_a_write_fails_it_and_leaves_nothing() -> None:
    env = simpy.Environment()
    disk = SimDisk(env)
    w = drive(env, disk.write("data/shard-0-0", blob(), 0, 0, "shard-0/0"))
    env.run(until=0.001)
    disk.wipe("data/shard-0-0")
    env.run()
    assert isinstance(w["got"], FileNotFoundError) and "data/shard-0-0" not in disk.folders


def test_bad_calibration_is_refused() -> None:
    with pytest.raises(ValueError, match="disk_write_mb_s"):
        DiskCalibration.of({"disk_write_mb_s": 0})


@pytest.fixture(scope="module")
def killed() -> tuple[SimShardCluster, dict]:
    cl = SimShardCluster(7)
    prim = cl.copies["shard-0/0"]
    disk = prim.disk
    disk.cal = DiskCalibration(disk_write_mb_s=0.002)
    cl.env.process(cl.client().run(until=10.0))
    out: dict = {}

    def scenario() -> Gen:
        yield from cl.clock.sleep(KILL_AFTER)
        yield from cl.clock.wait_until(lambda: any(w.startswith("checkpoints/") for w in prim.checkpoint_writes()),
                                       5.0, 0.001)
        out["before"] = disk.manifest(shared_dir(0))
        out["writing"] = prim.checkpoint_writes()
        prim.kill()
        cl.history.record("kill", {"target": prim.name})
        out["after"] = prim.checkpoint_writes()
        out["scan"] = disk.checkpoint_scan()

    cl.env.process(scenario())
    cl.env.run(until=END)
    out["end_scan"] = disk.checkpoint_scan()
    return cl, out


def test_a_kill_mid_write_is_caught_and_leaves_the_previous_manifest(killed) -> None:
    cl, out = killed
    (kill,) = [e for e in cl.history.events if e["f"] == "kill"]
    cps = [e for e in cl.history.events if e["f"] == "checkpoint"]
    first = cps[0]["value"]
    assert cps[0]["node"] == "shard-0/0" and cps[0]["t"] < KILL_AFTER and first["term"] == 1
    assert out["before"]["seq"] == first["seq"] and out["before"]["time"] == first["written"]
    (tmp,) = out["writing"]
    assert tmp.startswith("checkpoints/shard-0/state-t1-") and tmp.endswith(".tmp")
    assert out["after"] == out["writing"]                 # still there after the kill: caught mid-write
    shared = [v for v in out["scan"] if v["dir"] == "checkpoints/shard-0"]
    assert shared == [{"dir": "checkpoints/shard-0", "stray_tmp": [tmp.split("/")[-1]], "seq": first["seq"],
                       "file": out["before"]["file"], "size_ok": True, "loadable": True}]
    assert not [e for e in cps if e["node"] == "shard-0/0" and e["t"] > cps[0]["t"]]
    assert kill["t"] > KILL_AFTER


def test_the_next_primary_publishes_at_its_term_and_the_stray_file_stays(killed) -> None:
    cl, out = killed
    (promote,) = [e for e in cl.history.events if e["f"] == "promote" and e["value"]["epoch"] == 2]
    later = [e for e in cl.history.events if e["f"] == "checkpoint" and e["t"] > promote["t"]]
    assert later and {e["node"] for e in later} == {promote["node"]} and later[0]["value"]["term"] == 2
    (shared,) = [v for v in out["end_scan"] if v["dir"] == "checkpoints/shard-0"]
    assert shared["seq"] == later[-1]["value"]["seq"] and shared["loadable"] and shared["size_ok"]
    assert shared["stray_tmp"] == [out["writing"][0].split("/")[-1]]      # swept only after 60 s


def test_calibration_json_names_the_write_rate_checkpoint_mb_s() -> None:
    assert DiskCalibration.of({"checkpoint_mb_s": 200.0}).disk_write_mb_s == 200.0
    assert DiskCalibration.of({"checkpoint_mb_s": 1, "disk_write_mb_s": 2}).disk_write_mb_s == 2
    assert DiskCalibration.of(None) == DiskCalibration()
