"""How the backend starts node and worker processes: forked from the run's zygote when it is up,
else as plain `python -m` subprocesses. Both give the same handle (see procs.Proc)."""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import threading
from pathlib import Path

from pschaos.harness.errors import HarnessError
from pschaos.harness.machinery.procs import Proc, ProcessRef, Signals, python_module, run_env, wait_until


class ForkedProc(Signals):
    """A process forked by the zygote: the same methods as Proc.

    It is the zygote's child, not ours, so its pid alone says nothing once the zygote has reaped
    it: the handle holds a ProcessRef (pid + start time, through a pidfd) and every liveness check
    and signal goes through that, never to a bare pid.
    """

    def __init__(self, name: str, pid: int, create_time: float, log: Path) -> None:
        self.name, self.pid, self.log_path = name, pid, log
        self.ref = ProcessRef(pid, create_time)
        self.paused = False
        self.returncode: int | None = None

    def alive(self) -> bool:
        return self.ref.alive()

    def _send(self, sig: int) -> None:
        self.ref.send(sig)

    def _wait(self, timeout: float) -> bool:
        return wait_until(lambda: not self.alive(), timeout, 0.01)

    def stop(self, timeout: float = 5.0) -> int | None:
        if self.alive():
            self.terminate()
            if not self._wait(timeout):
                self.kill()
        self.release()
        return self.returncode

    def kill(self) -> None:
        if self.ref.send(signal.SIGKILL):
            self._wait(5)
        self.paused = False

    def release(self) -> None:
        if not self.alive():
            self.ref.close()


class Zygote:
    def __init__(self, run_dir: Path, run_id: str, owner: int | None, detach: bool) -> None:
        env = dict(os.environ, **run_env(run_id, owner))
        log = self.log_path = run_dir / "logs" / "zygote.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log, "ab")
        self.popen = subprocess.Popen(python_module("pschaos.harness.machinery.zygote"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
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
            line = self.popen.stdout.readline()
        if not line:
            raise HarnessError(f"the zygote exited while starting {name}; see {self.log_path}")
        reply = json.loads(line)
        return ForkedProc(name, reply["pid"], reply["ctime"], log)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def close(self, timeout: float = 3.0) -> None:
        """Stop it. It holds no state, and a clean exit with torch loaded takes about a second, so it
        gets SIGKILL at once (its stdin is closed too: it would exit on EOF by itself)."""
        try:
            self.popen.stdin.close()
        except OSError:
            pass
        self.popen.kill()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()


class Keeper:
    """What every launcher shares: it keeps every handle it ever gave out, so teardown can stop
    them all, including one a fault thread restarted behind the backend's back; once `closing` is
    set it starts nothing more (harness/backends/docker/containers.py's launcher is the other one)."""

    def __init__(self) -> None:
        self.handles: list[Signals] = []
        self.closing = False
        self._lock = threading.Lock()

    def _keep(self, h: Signals) -> Signals:
        """Called under the lock: remember `h`, forget handles whose process is gone."""
        self.handles = [x for x in self.handles if x.alive() and x is not h] + [h]
        return h

    def begin_close(self) -> None:
        """From now on spawn refuses; a spawn in progress finishes first (its handle is in `handles`)."""
        with self._lock:
            self.closing = True


class Launcher(Keeper):
    """Starts named processes, through the zygote when it is enabled and alive."""

    def __init__(self, run_dir: Path, run_id: str, owner: int | None, detach: bool, use_zygote: bool) -> None:
        super().__init__()
        self.run_dir, self.run_id, self.owner, self.detach = run_dir, run_id, owner, detach
        self.zygote: Zygote | None = None
        self.use_zygote = use_zygote

    def start(self) -> None:
        with self._lock:
            if self.closing:
                raise HarnessError("the run is being torn down; nothing more is started")
            if self.use_zygote and self.zygote is None:
                self.zygote = Zygote(self.run_dir, self.run_id, self.owner, self.detach)

    def spawn(self, name: str, module: str, argv: list[str], log: Path) -> Signals:
        with self._lock:
            if self.closing:
                raise HarnessError(f"not starting {name}: the run is being torn down")
            if self.zygote is not None and self.zygote.alive():
                h: Signals = self.zygote.spawn(name, module, argv, log)
            else:
                h = Proc(name, python_module(module, *argv), log, self.run_id, self.owner, self.detach)
            return self._keep(h)

    def close(self) -> None:
        self.begin_close()
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None
