"""A process is named by pid + start time (through a pidfd): a recycled pid is dead to the harness
and never receives its signals (issue 7, bug 4.8)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pschaos.harness.machinery.launcher import ForkedProc
from pschaos.harness.machinery.procs import ProcessRef, start_time, stop_all, wait_until


@pytest.fixture
def stranger():
    """An unrelated process that happens to hold the pid our handle names."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    wait_until(lambda: start_time(p.pid) is not None, 5)
    yield p
    p.kill()
    p.wait()


@pytest.fixture(params=["pidfd", "start-time"])
def mode(request, monkeypatch):
    """Both ways a ProcessRef can hold a process: a pidfd, or start times alone (no pidfd_open)."""
    if request.param == "start-time":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no os.pidfd_open on this platform")
    return request.param


def test_recycled_pid_is_dead_and_never_signalled(stranger, mode, tmp_path: Path):
    # Our process was pid P, started at T; the zygote reaped it and P now belongs to `stranger`,
    # which started later. The handle must see a dead process and must not touch the stranger.
    ours_started = start_time(stranger.pid) - 3.0
    h = ForkedProc("worker-0", stranger.pid, ours_started, tmp_path / "w.log")
    assert h.ref.fd is None
    assert not h.alive()
    h.signal(signal.SIGSTOP)
    h.kill()
    h.stop(timeout=0.2)
    h.terminate()
    stop_all([h], grace=0.1, kill_wait=0.1)
    time.sleep(0.1)
    assert stranger.poll() is None, "the stranger holding the recycled pid was killed"
    assert open(f"/proc/{stranger.pid}/stat").read().split()[2] != "T", "the stranger was stopped"


def test_our_process_is_alive_signalled_and_then_dead(stranger, mode, tmp_path: Path):
    h = ForkedProc("worker-0", stranger.pid, start_time(stranger.pid), tmp_path / "w.log")
    assert (h.ref.fd is not None) == (mode == "pidfd")
    assert h.alive()
    h.kill()
    assert stranger.wait(5) == -signal.SIGKILL
    assert not h.alive()


def test_pid_reused_after_the_handle_was_made(mode):
    """The pid changes hands while we hold the handle: the old handle sees a dead process."""
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ref = ProcessRef(first.pid, start_time(first.pid))
    assert ref.alive()
    first.kill()
    first.wait()                      # reaped: the pid is free for anyone now
    assert not ref.alive()
    assert ref.send(signal.SIGTERM) is False


def test_gone_pid_is_dead(mode):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    t = start_time(p.pid) or time.time()
    p.wait()
    ref = ProcessRef(p.pid, t)
    assert not ref.alive() and ref.send(signal.SIGKILL) is False


def test_zygote_reports_start_times(tmp_path: Path, monkeypatch):
    """The zygote's reply names the child by pid and start time, read before it could be reaped."""
    from pschaos.harness.machinery import launcher

    (tmp_path / "sleeper.py").write_text("import time\n\ndef main(argv):\n    time.sleep(float(argv[0]))\n")
    boot = f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import pschaos.harness.machinery.zygote as z; z.PRELOAD = (); " \
           "raise SystemExit(z.main())"
    monkeypatch.setattr(launcher, "python_module", lambda m, *a: [sys.executable, "-c", boot])
    z = launcher.Zygote(tmp_path, "test-zygote", None, False)
    try:
        quick = z.spawn("quick", "sleeper", ["0"], tmp_path / "q.log")
        slow = z.spawn("slow", "sleeper", ["60"], tmp_path / "s.log")
        assert slow.alive() and abs(slow.ref.create_time - start_time(slow.pid)) < 0.005
        assert wait_until(lambda: not quick.alive(), 5)
        assert wait_until(lambda: start_time(quick.pid) is None, 5), "the zygote did not reap it"
        slow.stop(timeout=2)
        assert not slow.alive()
        assert wait_until(lambda: start_time(slow.pid) is None, 5), "the zygote did not reap it"
    finally:
        z.close()


def test_owner_with_a_recycled_pid_is_dead(stranger):
    """`pschaos clean` asks whether a run's owner lives: a stranger holding its old pid does not count."""
    from pschaos.harness.machinery.procs import owner_alive

    t = start_time(stranger.pid)
    assert owner_alive(stranger.pid, t)
    assert not owner_alive(stranger.pid, t - 3.0)
    assert owner_alive(stranger.pid, None)           # an old tag without a start time: pid only
    assert owner_alive(-1, None) and not owner_alive(0, None)


def test_threads_racing_on_one_handle_close_its_pidfd_once_and_never_signal_a_closed_fd(monkeypatch):
    """The runner's sampler and a fault thread share handles: one sees the process gone and closes
    the pidfd while another is about to use it. A second close of the same number (which the
    kernel may already have handed to another file) or a signal through it must never happen."""
    import threading

    import pschaos.harness.machinery.procs as procs

    if getattr(os, "pidfd_open", None) is None:
        pytest.skip("no os.pidfd_open on this Python/kernel: the handle uses start times, no fd to race on")
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    ref = ProcessRef(p.pid, start_time(p.pid))
    p.wait()
    assert ref.fd is not None
    real_close, closed, errors = os.close, [], []

    def slow_close(fd):             # widen the window between closing the fd and forgetting it
        closed.append(fd)
        time.sleep(0.05)
        real_close(fd)
    monkeypatch.setattr(procs.os, "close", slow_close)
    go = threading.Barrier(8)

    def use():
        go.wait()
        try:
            ref.alive()
            ref.send(signal.SIGCONT)
        except Exception as e:      # noqa: BLE001 - what the race used to raise (EBADF)
            errors.append(e)
    ts = [threading.Thread(target=use) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == [] and len(closed) == 1 and ref.fd is None and not ref.alive()
