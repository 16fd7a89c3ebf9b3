"""The power-loss disk's model (diskfaults/disk.py) called directly, without FUSE: what a power
cut keeps is what was synced, file data by its fsync and directory changes by their directories'."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from pschaos.diskfaults.disk import Disk


@pytest.fixture
def disk(tmp_path: Path) -> Disk:
    (tmp_path / "disk").mkdir()
    return Disk(tmp_path / "disk", tmp_path / "trash")


def new(disk: Disk, rel: str, data: bytes, sync: bool = False) -> tuple:
    fd = disk.create(rel, 0o644)
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)
    disk.write(key, fd, rel, data, 0)
    if sync:
        disk.fsync(key, fd, rel)
    os.close(fd)
    return key


def on_disk(disk: Disk) -> dict[str, bytes]:
    return {str(p.relative_to(disk.root)): p.read_bytes() for p in sorted(disk.root.rglob("*")) if p.is_file()}


def test_data_reaches_the_disk_at_fsync_and_a_change_at_its_directory_fsync(disk):
    k = new(disk, "a", b"held")
    assert disk.size(k) == 4 and on_disk(disk) == {"a": b""}            # the name is there, the bytes are not
    new(disk, "b", b"synced", sync=True)
    disk.fsyncdir("")
    new(disk, "c", b"synced, its directory not", sync=True)
    loss = disk.power_loss()
    assert on_disk(disk) == {"a": b"", "b": b"synced"}
    assert loss.dropped == {"a": 4} and loss.undone == ["create c"] and not loss.errors


def test_rename_over_a_file_is_undone_until_the_directory_is_synced(disk):
    new(disk, "manifest", b"old", sync=True)
    disk.fsyncdir("")
    new(disk, "manifest.tmp", b"new", sync=True)
    disk.rename("manifest.tmp", "manifest")
    assert on_disk(disk) == {"manifest": b"new"}
    disk.power_loss()
    assert on_disk(disk) == {"manifest": b"old"}                         # the replaced file came back
    new(disk, "manifest.tmp", b"new", sync=True)
    disk.rename("manifest.tmp", "manifest")
    disk.fsyncdir("")
    disk.power_loss()
    assert on_disk(disk) == {"manifest": b"new"} and not list(disk.trash.iterdir())


def test_a_directory_never_synced_into_its_parent_takes_its_synced_files_with_it(disk):
    disk.mkdir("ckpt", 0o755)
    new(disk, "ckpt/state", b"data", sync=True)
    disk.fsyncdir("ckpt")
    loss = disk.power_loss()
    assert not (disk.root / "ckpt").exists() and loss.undone == ["mkdir ckpt"]


def test_a_renamed_directory_keeps_what_is_pending_in_it(disk):
    disk.mkdir("d", 0o755)
    disk.fsyncdir("")
    new(disk, "d/x", b"1", sync=True)
    disk.rename("d", "e")
    disk.fsyncdir("")                  # the rename is durable; the create of x in it is not
    disk.power_loss()
    assert on_disk(disk) == {} and (disk.root / "e").is_dir()
    new(disk, "e/y", b"2", sync=True)
    disk.fsyncdir("e")
    disk.power_loss()
    assert on_disk(disk) == {"e/y": b"2"}


def test_unlink_and_rmdir_come_back_unless_synced(disk):
    disk.mkdir("d", 0o700)
    new(disk, "f", b"keep", sync=True)
    disk.fsyncdir("")
    disk.unlink("f")
    disk.rmdir("d")
    disk.power_loss()
    assert on_disk(disk) == {"f": b"keep"} and (disk.root / "d").stat().st_mode & 0o777 == 0o700
    disk.unlink("f")
    disk.fsyncdir("")
    disk.power_loss()
    assert on_disk(disk) == {} and not list(disk.trash.iterdir())


def test_a_torn_write_lands_a_prefix_of_the_last_held_write(disk):
    k = new(disk, "log", b"A" * 100, sync=True)
    disk.fsyncdir("")
    fd = os.open(disk.path("log"), os.O_RDWR)
    disk.write(k, fd, "log", b"B" * 50, 100)
    disk.write(k, fd, "log", b"C" * 40, 10)
    os.close(fd)
    loss = disk.power_loss(torn={"path": "log", "keep_bytes": 8})
    assert on_disk(disk)["log"] == b"A" * 10 + b"C" * 8 + b"A" * 82
    assert loss.torn == {"path": "log", "torn": True, "offset": 10, "write_bytes": 40, "kept_bytes": 8}
    assert disk.power_loss(torn={"path": "log", "keep_bytes": 8}).torn["torn"] is False     # nothing held now


def test_truncate_is_held_like_a_write(disk):
    k = new(disk, "f", b"0123456789", sync=True)
    disk.fsyncdir("")
    disk.truncate(k, None, "f", 3)
    assert disk.size(k) == 3 and on_disk(disk)["f"] == b"0123456789"
    disk.fsync(k, None, "f")
    assert on_disk(disk)["f"] == b"012"


def test_an_undo_never_overwrites_an_entry_the_cut_keeps(disk):
    """A rename from a/ to b/ waits on b/; a new a/x is created and a/ synced, so the create is
    durable: undoing the rename would overwrite it, and the disk says so instead (review finding)."""
    disk.mkdir("a", 0o755)
    disk.mkdir("b", 0o755)
    new(disk, "a/x", b"old", sync=True)
    disk.fsyncdir("")
    disk.fsyncdir("a")
    disk.rename("a/x", "b/x")
    new(disk, "a/x", b"new", sync=True)
    disk.fsyncdir("a")
    loss = disk.power_loss()
    assert loss.errors and "rename a/x -> b/x" in loss.errors[0]
    assert on_disk(disk)["a/x"] == b"new"


def test_a_rename_over_a_file_or_an_empty_folder_is_undone_whole(disk):
    new(disk, "f", b"kept", sync=True)
    disk.mkdir("d", 0o700)
    disk.fsyncdir("")
    new(disk, "g", b"new", sync=True)
    disk.rename("g", "f")
    disk.mkdir("e", 0o755)
    disk.rename("e", "d")
    assert on_disk(disk) == {"f": b"new"} and list(disk.trash.iterdir())
    disk.power_loss()
    assert on_disk(disk) == {"f": b"kept"} and (disk.root / "d").stat().st_mode & 0o777 == 0o700
    assert not (disk.root / "e").exists() and not list(disk.trash.iterdir())


def test_a_durable_rmdir_settles_what_was_pending_in_the_folder(disk):
    disk.mkdir("d", 0o755)
    new(disk, "d/x", b"1", sync=True)
    disk.fsyncdir("d")
    disk.fsyncdir("")
    disk.unlink("d/x")                 # pending on d
    disk.rmdir("d")                    # pending on the root
    disk.fsyncdir("")                  # d is gone for good, and with it what waited on it
    loss = disk.power_loss()
    assert not loss.errors and not loss.undone and on_disk(disk) == {}


def test_a_tear_of_a_file_the_cut_removes_is_no_tear(disk):
    k = new(disk, "fresh", b"", sync=False)
    fd = os.open(disk.path("fresh"), os.O_RDWR)
    disk.write(k, fd, "fresh", b"Z" * 100, 0)
    os.close(fd)
    loss = disk.power_loss(torn={"path": "fresh", "keep_bytes": 10})
    assert loss.torn == {"path": "fresh", "torn": False, "removed": True, "write_bytes": 100, "kept_bytes": 10,
                         "why": "the cut removed the file: its entry never reached the disk"}
    assert not (disk.root / "fresh").exists()


def test_a_sync_trap_cuts_the_power_as_the_named_file_is_synced_and_tears_its_write(disk):
    """The manifest's sync is the moment a torn write matters: the trap cuts there, under the
    disk's lock, tears that file's last held write and keeps the disk off until powered on."""
    from pschaos.diskfaults.tear import SyncTrap

    new(disk, "manifest.json", b'{"seq": 1, "file": "old"}', sync=True)
    disk.fsyncdir("")
    disk.arm(SyncTrap("manifest.json", keep="prefix", r=0.5))
    k = new(disk, "state.psb", b"S" * 50, sync=True)         # another file's sync: no cut
    assert disk.trap.fired is None
    fd = os.open(disk.path("manifest.json"), os.O_RDWR)
    disk.truncate(k2 := (os.fstat(fd).st_dev, os.fstat(fd).st_ino), fd, "manifest.json", 0)
    disk.write(k2, fd, "manifest.json", b'{"seq": 22, "file": "new"}', 0)
    with pytest.raises(OSError) as e:
        disk.fsync(k2, fd, "/manifest.json")
    os.close(fd)
    assert e.value.errno == 5
    fired = disk.disarm()
    assert fired["path"] == "manifest.json" and fired["held_bytes"] == 26 and fired["undone"] == ["create state.psb"]
    assert fired["torn"]["torn"] is True and fired["torn"]["kept_bytes"] == 13
    assert on_disk(disk)["manifest.json"] == b'{"seq": 22, "ile": "old"}'    # the new's prefix over the old
    with pytest.raises(OSError):                               # off until the program is dead and it is powered on
        new(disk, "after", b"x")
    disk.power_on()
    new(disk, "after", b"x", sync=True)
    assert k not in disk.held and disk.disarm() is None


def test_keep_for_lands_at_least_one_byte_and_never_all(disk):
    from pschaos.diskfaults.tear import PAGE, keep_for

    assert [keep_for(10, "prefix", r) for r in (0.0, 0.5, 0.999999)] == [1, 5, 9]
    assert keep_for(3 * PAGE + 5, "pages", 0.0) == PAGE and keep_for(3 * PAGE + 5, "pages", 0.99) == 3 * PAGE
    assert keep_for(PAGE, "pages", 0.9999999) == PAGE - 1       # a page or less: a prefix
    assert keep_for(1, "prefix", 0.3) is None
    with pytest.raises(ValueError):
        keep_for(10, "all", 0.1)


def test_one_trap_at_a_time_its_status_is_cheap_and_its_caller_dies_first(disk):
    """A second trap is refused until the first is taken back; `trap_status` reads no files; the
    process that asks for the trapped sync is SIGKILLed before the cut (a real child here)."""
    import signal
    import subprocess
    import sys

    from pschaos.diskfaults.tear import SyncTrap

    disk.arm(SyncTrap("m"))
    with pytest.raises(OSError):
        disk.arm(SyncTrap("n"))
    assert disk.trap_status() == {"trap": {"name": "m", "keep": None, "fired": None}, "off": ""}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        k = new(disk, "m.tmp", b"abc")
        with pytest.raises(OSError):
            disk.fsync(k, None, "m.tmp", caller=child.pid)
        assert child.wait(10) == -signal.SIGKILL
    finally:
        child.kill()
    assert disk.trap_status()["off"] and disk.disarm()["path"] == "m.tmp"
    disk.power_on()
    disk.arm(SyncTrap("n"))
