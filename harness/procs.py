"""Child processes of a run, tagged so that nothing outlives it.

Every process the harness starts carries PSCHAOS_RUN (the run id) and PSCHAOS_OWNER (the pid of
the process that owns the run) in its environment. Teardown stops them; if the owner itself was
killed, `pschaos clean` finds them by that tag and reaps them.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

RUN_ENV, OWNER_ENV = "PSCHAOS_RUN", "PSCHAOS_OWNER"


class Signals:
    """Signal delivery shared by every process handle; tracks whether SIGSTOP left it paused."""

    pid: int
    paused: bool

    def alive(self) -> bool:
        raise NotImplementedError

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)
        if sig == signal.SIGSTOP:
            self.paused = True
        elif sig in (signal.SIGCONT, signal.SIGKILL):
            self.paused = False


class Proc(Signals):
    """One named child process with its log file."""

    def __init__(self, name: str, argv: list[str], log: Path, run_id: str, owner: int | None = None,
                 detach: bool = False) -> None:
        self.name, self.argv, self.log_path = name, argv, log
        env = dict(os.environ, **{RUN_ENV: run_id, OWNER_ENV: str(owner or os.getpid()),
                                  "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log, "ab")
        self.popen = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                      stdin=subprocess.DEVNULL, start_new_session=detach)
        self.paused = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; a paused process is resumed first so it can exit."""
        if self.alive():
            if self.paused:
                self.signal(signal.SIGCONT)
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        self._log.close()
        return self.popen.returncode

    def kill(self) -> None:
        if self.alive():
            self.popen.kill()
            self.popen.wait(5)
        self.paused = False
        self._log.close()


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def tagged_processes(run_id: str | None = None) -> list[psutil.Process]:
    """Processes carrying a pschaos run tag (of `run_id`, or of any run)."""
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        if RUN_ENV in env and (run_id is None or env[RUN_ENV] == run_id):
            out.append(p)
    return out


def orphaned(p: psutil.Process) -> bool:
    """True when the run that started `p` has no live owner any more."""
    try:
        owner = int(p.environ().get(OWNER_ENV, "0"))
    except (psutil.Error, ValueError):
        return True
    if owner == -1:          # a detached `cluster up`: only `cluster down` or `clean --all` reap it
        return False
    return owner == 0 or not psutil.pid_exists(owner) or owner == p.pid


def reap(procs: list[psutil.Process]) -> list[str]:
    """SIGCONT then SIGKILL each process; returns what was reaped, for the user to read."""
    done = []
    for p in procs:
        try:
            desc = f"{p.pid} {' '.join(p.cmdline()[:6])}"
            p.send_signal(signal.SIGCONT)
            p.kill()
            done.append(desc)
        except psutil.Error:
            continue
    psutil.wait_procs(procs, timeout=5)
    return done


def wait_until(pred, timeout: float, interval: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(interval)
    return pred()
