"""How the backend starts node and worker processes: forked from the run's zygote when it is up,
else as plain `python -m` subprocesses. Both give the same handle (see procs.Proc)."""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil

from .errors import HarnessError
from .procs import OWNER_ENV, RUN_ENV, Proc, Signals, python_module


class ForkedProc(Signals):
    """A process forked by the zygote: the same methods as Proc, driven by pid."""

    def __init__(self, name: str, pid: int, log: Path) -> None:
        self.name, self.pid, self.log_path = name, pid, log
        self.paused = False
        self.returncode: int | None = None

    def alive(self) -> bool:
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def _wait(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if not self.alive():
                return True
            time.sleep(0.01)
        return not self.alive()

    def stop(self, timeout: float = 5.0) -> int | None:
        if self.alive():
            if self.paused:
                self.signal(signal.SIGCONT)
            os.kill(self.pid, signal.SIGTERM)
            if not self._wait(timeout):
                self.kill()
        return self.returncode

    def kill(self) -> None:
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            self._wait(5)
        self.paused = False


class Zygote:
    def __init__(self, run_dir: Path, run_id: str, owner: int | None, detach: bool) -> None:
        env = dict(os.environ, **{RUN_ENV: run_id, OWNER_ENV: str(owner or os.getpid()),
                                  "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"})
        log = run_dir / "logs" / "zygote.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log, "ab")
        self.popen = subprocess.Popen(python_module("harness.zygote"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._log, env=env, start_new_session=detach, text=True, bufsize=1)
        self.ids = itertools.count(1)
        self.lock = threading.Lock()
        line = self.popen.stdout.readline()
        if not line or "ready" not in line:
            self.close()
            raise HarnessError(f"the zygote did not start; see {log}")

    def spawn(self, name: str, module: str, argv: list[str], log: Path) -> ForkedProc:
        log.parent.mkdir(parents=True, exist_ok=True)
        with self.lock:
            rid = next(self.ids)
            self.popen.stdin.write(json.dumps({"id": rid, "module": module, "argv": argv, "log": str(log)}) + "\n")
            self.popen.stdin.flush()
            reply = json.loads(self.popen.stdout.readline())
        return ForkedProc(name, reply["pid"], log)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def close(self) -> None:
        try:
            self.popen.stdin.close()
            self.popen.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            self.popen.kill()
        self._log.close()


class Launcher:
    """Starts named processes, through the zygote when it is enabled and alive."""

    def __init__(self, run_dir: Path, run_id: str, owner: int | None, detach: bool, use_zygote: bool) -> None:
        self.run_dir, self.run_id, self.owner, self.detach = run_dir, run_id, owner, detach
        self.zygote: Zygote | None = None
        self.use_zygote = use_zygote

    def start(self) -> None:
        if self.use_zygote and self.zygote is None:
            self.zygote = Zygote(self.run_dir, self.run_id, self.owner, self.detach)

    def spawn(self, name: str, module: str, argv: list[str], log: Path):
        if self.zygote is not None and self.zygote.alive():
            return self.zygote.spawn(name, module, argv, log)
        return Proc(name, python_module(module, *argv), log, self.run_id, self.owner, self.detach)

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
