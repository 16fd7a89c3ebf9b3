"""What killed Ray tasks and local clusters leave (harness/fanout/leftovers.py): removed once their
owners are dead, never while one lives or while a task is still being set up."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from pschaos.harness.fanout import leftovers
from pschaos.harness.fanout.leftovers import claim, remove_dead


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_folder_is_removed_only_when_all_its_owners_are_dead(tmp_path):
    live, dead = tmp_path / "pschaos-task-live", tmp_path / "pschaos-task-dead"
    cluster = tmp_path / "pschaos-ray-x"
    for d in (live, dead, cluster):
        d.mkdir()
    claim(live, _dead_pid(), os.getpid())            # its run lives on
    claim(dead, _dead_pid(), _dead_pid())
    claim(cluster, _dead_pid())                      # a driver killed outright
    assert sorted(remove_dead(tmp_path)) == sorted([str(dead), str(cluster)])
    assert live.is_dir() and (live / "owners").read_text()


def test_a_task_being_set_up_is_kept_and_one_killed_then_goes_after_a_while(tmp_path, monkeypatch):
    young, empty = tmp_path / "pschaos-task-young", tmp_path / "pschaos-task-empty"
    young.mkdir()
    empty.mkdir()
    (empty / "owners").write_text("")               # never written whole: not judged
    assert remove_dead(tmp_path) == []
    old = time.time() - leftovers.SETUP_S - 5
    os.utime(young, (old, old))
    assert remove_dead(tmp_path) == [str(young)]
    assert empty.is_dir()
    other = tmp_path / "someone-else"
    other.mkdir()
    assert remove_dead(tmp_path) == [] and other.is_dir()
