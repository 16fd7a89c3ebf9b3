"""power-loss and torn-write (harness/faults/storage.py) against a fake backend: the copy dies
before its disk's power goes, what the disk lost is recorded, the torn write is the seed's, and
every way the fault could not fire is a HarnessError (the run unknown), never a quiet pass."""
from __future__ import annotations

import random

import pytest

from pschaos.harness.errors import HarnessError
from pschaos.harness.faults import FaultContext, build, params_error

from tests.unit.fake_backend import ManualClock


class DiskBackend:
    name = "process"

    def __init__(self, held: dict | None = None, undo_errors: list | None = None) -> None:
        self.calls: list[tuple] = []
        self.dead: set[str] = set()
        self.held, self.undo_errors = held or {}, undo_errors or []

    def kill(self, name: str) -> None:
        self.calls.append(("kill", name))
        self.dead.add(name)

    def alive(self, name: str) -> bool:
        return name not in self.dead

    def restart(self, name: str) -> None:
        self.calls.append(("restart", name))
        self.dead.discard(name)

    def held_writes(self, name: str) -> dict:
        return dict(self.held)

    def power_loss(self, name: str, torn=None) -> dict:
        assert name in self.dead, "the power went while the copy still ran"
        self.calls.append(("power_loss", name, torn))
        return {"ok": True, "dropped_bytes": 10, "dropped_files": {"a": 10}, "undone": ["create /a"],
                "undo_errors": self.undo_errors, "torn": torn and {"torn": True, **torn}}

    def checkpoint_scan(self) -> list[dict]:
        return [{"dir": "data/shard-0-0", "seq": 7, "loadable": True}]

    def shard_nodes(self, shard: int) -> list[str]:
        return [f"shard-{shard}/{i}" for i in range(3)]

    def routing(self) -> dict:
        return {0: Rec(self.epoch_after_kill, self.primary_after_kill)} if hasattr(self, "epoch_after_kill") else {}


class Rec:
    def __init__(self, epoch: int, primary: str) -> None:
        self.epoch, self.primary = epoch, primary


def fault(kind: str, be, params: dict | None = None, seed: int = 1, target: str = "shard-0/0"):
    records: list[tuple[str, dict]] = []
    ctx = FaultContext(be, random.Random(seed), lambda f, v: records.append((f, v)) or v, clock=ManualClock())
    return build(kind, ctx, target, params or {}), records


def test_power_loss_kills_then_cuts_then_restarts_and_records_the_loss():
    be = DiskBackend()
    f, records = fault("power-loss", be)
    f.inject()
    assert be.calls == [("kill", "shard-0/0"), ("power_loss", "shard-0/0", None)]
    assert f.info["power_loss"] == {"dropped_bytes": 10, "dropped_files": ["a"], "undone": ["create /a"],
                                    "undone_count": 1, "torn": None}
    assert records == [("checkpoint-scan", {"dir": "data/shard-0-0", "seq": 7, "loadable": True,
                                            "after_power_loss": "shard-0/0"})]
    f.heal()
    assert be.calls[-1] == ("restart", "shard-0/0")


def test_torn_write_tears_the_seeds_held_write_by_whole_pages():
    held = {"state.psb.1.tmp": 3 * 4096 + 5, "manifest.json.1.tmp": 200}
    picks = set()
    for seed in range(1, 12):
        be = DiskBackend(held)
        f, _ = fault("torn-write", be, seed=seed)
        f.inject()
        torn = be.calls[1][2]
        picks.add(torn["path"])
        if torn["path"] == "state.psb.1.tmp":
            assert torn["keep_bytes"] in (4096, 8192, 12288)
        else:
            assert 1 <= torn["keep_bytes"] < 200             # under a page: a prefix, never all of it
        again, _ = fault("torn-write", DiskBackend(held), seed=seed)
        again.inject()
        assert again.info["torn_target"] == f.info["torn_target"]        # the seed's, every time
    assert picks == set(held)


def test_a_torn_write_with_nothing_to_tear_does_not_fire():
    with pytest.raises(HarnessError, match="no write was held"):
        fault("torn-write", DiskBackend())[0].inject()
    with pytest.raises(HarnessError, match="no write to wal was held"):
        fault("torn-write", DiskBackend({"x": 9000}), {"file": "wal"})[0].inject()
    with pytest.raises(HarnessError, match="too small to tear"):
        fault("torn-write", DiskBackend({"x": 1}))[0].inject()


def test_a_disk_that_could_not_undo_a_change_fails_closed():
    with pytest.raises(HarnessError, match="could not undo"):
        fault("power-loss", DiskBackend(undo_errors=["rename /a -> /b: gone"]))[0].inject()


def test_refused_by_name_where_there_is_no_disk_and_for_a_worker():
    class Sim:
        name = "sim"
        kill = alive = restart = DiskBackend.kill
    with pytest.raises(HarnessError, match="--backend process"):
        fault("power-loss", Sim())[0].inject()
    with pytest.raises(HarnessError, match="only shard copies"):
        fault("power-loss", DiskBackend(), target="worker-0")[0].inject()


def test_params_are_checked_when_the_scenario_loads():
    assert "during" in params_error("power-loss", {"during": "promotion"})
    assert "keep" in params_error("torn-write", {"keep": "half"})
    assert params_error("power-loss", {"during": "checkpoint"}) is None
    assert params_error("torn-write", {"keep": "prefix", "file": "wal"}) is None


class RotBackend(DiskBackend):
    def rot(self, name: str, file: str, choose) -> dict:
        assert name in self.dead, "a file rots at rest only while its copy is down"
        offset, bit = choose(1000)
        self.calls.append(("rot", name, file, offset, bit))
        return {"file": file or "state.psb", "offset": offset, "bit": bit, "before": 0, "after": 1 << bit, "bytes": 1000}


def test_bit_rot_flips_the_seeds_bit_of_a_dead_copys_file_and_records_whose_file():
    be = RotBackend()
    f, _ = fault("bit-rot", be, seed=3)
    f.inject()
    again = RotBackend()
    g, _ = fault("bit-rot", again, seed=3)
    g.inject()
    assert be.calls[0] == ("kill", "shard-0/0") and be.calls[1][:3] == ("rot", "shard-0/0", "")
    assert f.info["rotted"] == g.info["rotted"] and f.info["rotted"]["manifest_file"] is True
    named, _ = fault("bit-rot", RotBackend(), {"file": "old.psb"})
    named.inject()
    assert named.info["rotted"]["manifest_file"] is False      # not the manifest's: it excuses no refusal
    f.heal()
    assert be.calls[-1] == ("restart", "shard-0/0")


def test_bit_rot_refuses_paths_outside_the_folder_and_takes_the_sealed_manifest():
    assert "inside the copy's data folder" in params_error("bit-rot", {"file": "/etc/passwd"})
    assert "inside the copy's data folder" in params_error("bit-rot", {"file": "../shard-0-1/x"})
    assert params_error("bit-rot", {"file": "manifest.json"}) is None      # its seal tells a rotted one
    assert params_error("bit-rot", {}) is None


def test_a_cut_at_a_sync_names_a_file_and_goes_alone():
    assert params_error("torn-write", {"sync_of": "manifest.json", "keep": "prefix"}) is None
    assert params_error("power-loss", {"sync_of": "manifest.json"}) is None
    for bad in ({"sync_of": "a/manifest.json"}, {"sync_of": "manifest.json", "during": "checkpoint"},
                {"sync_of": "manifest.json", "copies": "all"}, {"sync_of": "manifest.json", "after_s": 1.0}):
        assert "sync_of" in params_error("power-loss", bad), bad
    assert "both name" in params_error("torn-write", {"sync_of": "manifest.json", "file": "x"})


def test_a_power_cut_during_catch_up_names_a_replica_and_is_power_loss_only():
    from pschaos.harness.faults.moments import moment_target_error

    assert params_error("power-loss", {"during": "catch-up"}) is None
    assert "power-loss only" in params_error("torn-write", {"during": "catch-up"})
    assert "names the replica" in moment_target_error("power-loss", {"during": "catch-up"}, "primary(shard=0)")
    assert moment_target_error("power-loss", {"during": "catch-up"}, "replica(shard=0)") is None


def test_power_loss_of_all_copies_kills_every_live_copy_before_any_disk_is_cut():
    """copies: all is a rack's power: every copy is killed, one right after another, before any
    disk is cut (CI, power-loss-all-copies seed 1, cut one by one: a replica won an election
    between two cuts); a copy another fault holds down has its disk cut too but is left to that
    fault to start; healing starts every copy this one killed."""
    be = DiskBackend()
    be.dead.add("shard-0/2")                      # down already (another fault's)
    f, records = fault("power-loss", be, {"copies": "all"})
    f.inject()
    assert be.calls == [("kill", "shard-0/0"), ("kill", "shard-0/1"), ("power_loss", "shard-0/0", None),
                        ("power_loss", "shard-0/1", None), ("power_loss", "shard-0/2", None)]
    assert f.info["victims"] == ["shard-0/0", "shard-0/1"] and f.info["already_down"] == ["shard-0/2"]
    assert set(f.info["power_loss_others"]) == {"shard-0/1", "shard-0/2"}
    assert len(records) == 1                      # one scan, as the cut left the disks
    f.heal()
    assert be.calls[-2:] == [("restart", "shard-0/0"), ("restart", "shard-0/1")]
    assert "copies" in params_error("power-loss", {"copies": "some"})
    assert "catch-up" in params_error("power-loss", {"copies": "all", "during": "catch-up"})


def test_a_kill_claims_a_term_the_record_names_a_dead_copy_at_only_when_it_was_won_during_the_fault():
    """A copy killed between winning its epoch and writing its promote event leaves only the
    shard record: the kill records it (primary_when_killed) when the epoch is above the one read
    before the fault; a term won before (its missing event a gap of the system's), one naming a
    live copy, or no epoch read before claims nothing."""
    be = DiskBackend()
    be.epoch_after_kill, be.primary_after_kill = 2, "shard-0/1"
    f, _ = fault("power-loss", be, {"copies": "all"})
    f.epoch_before = 1
    f.inject()
    assert f.info["primary_when_killed"] == {"epoch": 2, "node": "shard-0/1"}
    plain, _ = fault("kill", be, target="shard-0/1")
    plain.epoch_before = 1
    plain.inject()
    assert plain.info["primary_when_killed"] == {"epoch": 2, "node": "shard-0/1"}
    for before in (2, None):                      # won before the fault came, or nothing read before
        old, _ = fault("kill", be, target="shard-0/1")
        old.epoch_before = before
        old.inject()
        assert "primary_when_killed" not in old.info
    be2 = DiskBackend()
    be2.epoch_after_kill, be2.primary_after_kill = 2, "shard-0/2"
    live, _ = fault("kill", be2)
    live.epoch_before = 1
    live.inject()
    assert "primary_when_killed" not in live.info


class TrapBackend(DiskBackend):
    """A disk whose sync trap fires at once (`fires`), or never."""

    def __init__(self, fires: bool, torn: dict | None = None) -> None:
        super().__init__()
        self.fires, self.torn, self.armed = fires, torn, None

    def arm_sync_cut(self, name, kind, file, keep, r):
        self.calls.append(("arm", name, file, keep))
        self.armed = (file, keep, r)
        if self.fires:
            self.dead.add(name)                    # the disk kills the copy, then cuts
            self.off = True

    def sync_cut_fired(self, name):
        return self.fires

    def disarm_sync_cut(self, name, kind):
        self.calls.append(("disarm", name))
        if not self.fires:
            return None
        return {"path": "manifest.json.1.tmp", "held_bytes": 120, "dropped_bytes": 120, "dropped_files": {"m": 120},
                "undone": ["create /manifest.json.1.tmp"], "undo_errors": [], "torn": self.torn}

    def power_on(self, name, kind):
        assert name in self.dead, "powered on while the copy ran"
        self.calls.append(("power_on", name))
        self.off = False

    def disk_off(self, name):
        return getattr(self, "off", False)


def test_a_cut_at_a_manifests_sync_arms_the_disk_and_records_the_cut_it_made():
    removed = {"path": "/manifest.json.1.tmp", "torn": False, "removed": True, "why": "the cut removed the file"}
    be = TrapBackend(fires=True, torn=removed)
    f, records = fault("torn-write", be, {"sync_of": "manifest.json", "keep": "prefix"})
    f.inject()
    assert be.calls == [("arm", "shard-0/0", "manifest.json", "prefix"), ("disarm", "shard-0/0"),
                        ("kill", "shard-0/0"), ("power_on", "shard-0/0")]
    assert 0 <= be.armed[2] < 1                               # the seed's draw for the tear
    assert f.info["caught_syncing"] == "manifest.json.1.tmp" and f.info["power_loss"]["torn"] == removed
    assert len(records) == 1
    nothing = {"path": "/m", "torn": False, "why": "its last held write is 1 byte(s): nothing to tear"}
    f, _ = fault("torn-write", TrapBackend(fires=True, torn=nothing), {"sync_of": "manifest.json"})
    with pytest.raises(HarnessError, match="nothing was torn"):
        f.inject()


def test_a_sync_that_never_came_is_a_plain_cut_that_says_the_moment_was_missed():
    be = TrapBackend(fires=False)
    f, _ = fault("power-loss", be, {"sync_of": "manifest.json", "wait_s": 0.05})
    f.inject()
    assert be.calls == [("arm", "shard-0/0", "manifest.json", None), ("disarm", "shard-0/0"), ("kill", "shard-0/0"),
                        ("power_loss", "shard-0/0", None)]
    assert f.info["caught_syncing"] is None
    f, _ = fault("power-loss", DiskBackend(), {"sync_of": "manifest.json"})
    with pytest.raises(HarnessError, match="sync trap"):
        f.inject()                                            # a backend without the trap: refused by name


def test_a_cut_at_a_sync_that_failed_midway_is_cleaned_up_by_its_heal():
    """An inject that fails after the trap fired (here the kill check) leaves the disk off: the
    heal takes the trap back and powers the disk on before the copy starts again on it."""
    class Broken(TrapBackend):
        def kill(self, name):
            super().kill(name)
            raise HarnessError("kill: the launcher did not answer")

    be = Broken(fires=True)
    f, _ = fault("power-loss", be, {"sync_of": "manifest.json"})
    with pytest.raises(HarnessError):
        f.inject()
    assert be.disk_off("shard-0/0")
    f.heal()
    assert be.calls[-3:] == [("disarm", "shard-0/0"), ("power_on", "shard-0/0"), ("restart", "shard-0/0")]
    assert not be.disk_off("shard-0/0")
