"""The twin's disk after a power cut (harness/backends/sim/disk.py): a folder holds its last
sync's entries, each file's data only if it was synced, and no temporary file; what the FUSE
power-loss disk does for the process backend."""
from __future__ import annotations

import json

import simpy

from pschaos.harness.backends.sim.disk import SimDisk

from tests.unit.harness.backends.sim.test_copy_checkpoint import blob, drive

D = "data/shard-0-0"


def test_a_cut_keeps_the_last_committed_checkpoint_and_drops_what_was_in_flight() -> None:
    env = simpy.Environment()
    disk = SimDisk(env)
    first = drive(env, disk.write(D, blob(5), 5, 1, "shard-0/0", newer_only=False))
    env.run()
    disk.put(D, "verified.json", json.dumps([[1, "shard-0/0"]]).encode())
    drive(env, disk.write(D, blob(9), 9, 1, "shard-0/0", newer_only=False))
    env.run(until=env.now + 0.001)                         # the second write is in flight
    loss = disk.power_loss(D)
    assert disk.read(D) == (first["got"][0], blob(5))
    assert sorted(disk.folders[D].files) == ["manifest.json", first["got"][0]["file"]]
    assert not disk.folders[D].tmp and loss["dropped_files"][-1].endswith(".tmp")
    assert "verified.json" in loss["undone"]               # written without a sync: never on the disk


def test_the_old_state_file_a_sweep_removed_comes_back_until_the_next_sync() -> None:
    env = simpy.Environment()
    disk = SimDisk(env)
    a = drive(env, disk.write(D, blob(5), 5, 1, "shard-0/0", newer_only=False))
    env.run()
    b = drive(env, disk.write(D, blob(9), 9, 1, "shard-0/0", newer_only=False))
    env.run()
    disk.power_loss(D)
    assert disk.read(D) == (b["got"][0], blob(9))                        # the commit was synced
    assert a["got"][0]["file"] in disk.folders[D].files                 # its sweep was not


def test_unsynced_data_is_empty_after_the_cut_and_the_checkpoint_unreadable() -> None:
    """What the zoo's data-renamed-unsynced does to the twin: the names reach the disk with the
    folder's sync, the bytes never do."""
    env = simpy.Environment()
    disk = SimDisk(env)
    drive(env, disk.write(D, blob(5), 5, 1, "shard-0/0", newer_only=False))
    env.run()
    disk.folders[D].unsynced |= set(disk.folders[D].files)
    disk._sync_folder(disk.folders[D])
    disk.power_loss(D)
    assert disk.read(D) is None and set(disk.folders[D].files.values()) == {b""}
    assert disk.power_loss("data/no-such-node")["dropped_bytes"] == 0
