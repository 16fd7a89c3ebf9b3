"""The power-loss disk on a real FUSE mount (diskfaults/): programs write through the kernel, and
a power cut leaves what a disk would hold: synced data, directory changes whose directories were
synced, nothing the kernel kept. psnodes' own checkpoint writer is put through it, and a mount
whose serving process was killed outright is found and unmounted."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pschaos.diskfaults.mounts import DiskMount, available, mounted, reap
from pschaos.harness.machinery.tools import REPO
from pschaos.psnodes.store.checkpoint import MANIFEST, _fsync_dir as sync_dir, read_checkpoint, write_checkpoint

if available():
    pytest.skip(f"the power-loss disk cannot be mounted here: {available()}", allow_module_level=True)


@pytest.fixture
def disk(tmp_path: Path):
    with DiskMount(tmp_path / "store", tmp_path / "mnt") as m:
        yield m
    assert not mounted(tmp_path)


def test_a_power_cut_keeps_what_was_synced_and_nothing_the_kernel_kept(disk):
    m = disk.mount
    (m / "never-synced").write_bytes(b"x" * 5000)
    with open(m / "synced", "wb") as f:
        f.write(b"kept")
        f.flush()
        os.fsync(f.fileno())
    sync_dir(m)
    with open(m / "synced", "ab") as f:
        f.write(b" and lost")
    assert (m / "synced").read_bytes() == b"kept and lost"             # the program sees its writes
    loss = disk.power_loss()
    assert (m / "synced").read_bytes() == b"kept" and (m / "never-synced").read_bytes() == b""
    assert loss["dropped_bytes"] == 5000 + len(b"kept and lost") and not loss["undo_errors"]
    assert (m / "synced").stat().st_size == 4                          # no attribute the kernel cached


def test_write_aside_and_rename_is_durable_only_with_the_directory_synced(disk):
    m = disk.mount
    for sync in (False, True):
        with open(m / "state.tmp", "wb") as f:
            f.write(b"new")
            f.flush()
            os.fsync(f.fileno())
        os.replace(m / "state.tmp", m / "state")
        if sync:
            sync_dir(m)
        disk.power_loss()
        assert sorted(os.listdir(m)) == (["state"] if sync else [])


def test_psnodes_checkpoints_survive_a_power_cut(disk):
    """psnodes writes its checkpoint aside, syncs it, renames it and syncs the folder: a power cut
    after write_checkpoint returns keeps that checkpoint whole, in a folder it made itself."""
    folder = disk.mount / "checkpoints"
    write_checkpoint(folder, b"a" * 4096, seq=10, epoch=1, node="shard-0/0")
    write_checkpoint(folder, b"b" * 4096, seq=20, epoch=1, node="shard-0/0")
    disk.power_loss()
    got = read_checkpoint(folder)
    assert got is not None, sorted(os.listdir(disk.mount))
    man, blob = got
    assert man["seq"] == 20 and blob == b"b" * 4096


def test_a_torn_write_through_the_mount(disk):
    m = disk.mount
    with open(m / "wal", "wb") as f:
        f.write(b"A" * 8192)
        f.flush()
        os.fsync(f.fileno())
    sync_dir(m)
    with open(m / "wal", "r+b") as f:
        f.seek(8192)
        f.write(b"B" * 8192)
    loss = disk.power_loss(torn={"path": "wal", "keep_bytes": 4096})
    assert (m / "wal").read_bytes() == b"A" * 8192 + b"B" * 4096 and loss["torn"]["kept_bytes"] == 4096


@pytest.mark.xdist_group("pschaos-clean")
def test_a_mount_whose_process_was_killed_is_reaped(tmp_path):
    m = DiskMount(tmp_path / "store", tmp_path / "mnt").start()
    os.kill(m.proc.pid, signal.SIGKILL)
    m.proc.wait(10)
    assert mounted(tmp_path) == [tmp_path / "mnt"]                    # a dead server's mount stays
    assert reap(tmp_path) == [str(tmp_path / "mnt")] and not mounted(tmp_path)


@pytest.mark.xdist_group("pschaos-clean")
def test_pschaos_clean_unmounts_a_killed_runs_disks(tmp_path):
    m = DiskMount(tmp_path / "store", tmp_path / "mnt").start()
    os.kill(m.proc.pid, signal.SIGKILL)
    m.proc.wait(10)
    live = DiskMount(tmp_path / "store2", tmp_path / "live").start()        # a live one is not clean's
    try:
        p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "clean"],
                           capture_output=True, text=True, timeout=120, cwd=REPO)
        assert f"unmounted power-loss disk {tmp_path / 'mnt'}" in p.stdout, p.stdout + p.stderr
        assert mounted(tmp_path) == [tmp_path / "live"]
    finally:
        live.stop()


def test_a_shorter_rewrite_truncates_and_a_dsync_write_is_durable_at_once(disk):
    """open(..., "w") truncates (libfuse3 hands O_TRUNC to the file system: ours to do), and a
    file opened O_DSYNC has each write on the disk when it returns (review findings)."""
    m = disk.mount
    (m / "f").write_bytes(b"x" * 100)
    (m / "f").write_bytes(b"short")
    assert (m / "f").read_bytes() == b"short"
    fd = os.open(m / "log", os.O_CREAT | os.O_WRONLY | os.O_DSYNC, 0o644)
    os.write(fd, b"abc")
    os.close(fd)
    sync_dir(m)
    disk.power_loss()
    assert (m / "log").read_bytes() == b"abc" and (m / "f").read_bytes() == b""


WRITER = """
import sys
from pathlib import Path
from pschaos.psnodes.store.checkpoint import write_checkpoint
folder = Path(sys.argv[1])
write_checkpoint(folder, b"a" * 5000, seq=10, epoch=1, node="shard-0/0")
print("first", flush=True)
sys.stdin.readline()
write_checkpoint(folder, b"b" * 5000, seq=20, epoch=1, node="shard-0/0")
print("second written: the trap did not fire", flush=True)
"""


def test_a_trap_cuts_the_power_as_a_real_writer_syncs_its_manifest_and_kills_it_first(disk):
    """A real process writing psnodes checkpoints: the trap armed on manifest.json kills it inside
    its manifest's fsync and cuts the power there. The write-aside never reached the folder, so
    the first checkpoint stands, whole; the disk refuses calls until it is powered on."""
    folder = disk.mount / "ckpt"
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout.readline().strip() == "first"
        disk.order("arm", name="manifest.json", keep="prefix", r=0.5)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.wait(20) == -signal.SIGKILL, p.stdout.read()
    finally:
        p.kill()
    fired = disk.order("disarm")["fired"]
    assert fired["path"].startswith("ckpt/manifest.json.") and fired["path"].endswith(".tmp")
    assert fired["torn"]["removed"] is True and not fired["undo_errors"]
    assert any(u.startswith("create /ckpt/state-t1-000000000020") for u in fired["undone"])
    assert disk.status()["off"]
    with pytest.raises(OSError):
        (disk.mount / "x").write_bytes(b"refused while the power is off")
    disk.order("power-on")
    man, blob = read_checkpoint(folder)
    assert (man["seq"], blob) == (10, b"a" * 5000)
    assert sorted(n for n in os.listdir(folder) if not n.startswith(".")) == [MANIFEST, man["file"]]
