"""Child processes of a run, tagged so that nothing outlives it.

Every process the harness starts carries PSCHAOS_RUN (the run id) and PSCHAOS_OWNER (the pid of
the process that owns the run) in its environment. Teardown stops them; if the owner itself was
killed, `pschaos clean` finds them by that tag and reaps them.
"""
from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import psutil

RUN_ENV, OWNER_ENV, OWNER_START_ENV = "PSCHAOS_RUN", "PSCHAOS_OWNER", "PSCHAOS_OWNER_START"


def start_time(pid: int) -> float | None:
    """When process `pid` started (psutil's create_time), or None when there is no such process."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


class ProcessRef:
    """One particular process, not merely a pid.

    A process forked by the zygote is the zygote's child: the zygote reaps it, and its pid is then
    free for the kernel to hand to an unrelated process. A bare pid would make that stranger look
    alive (a restart does nothing) and receive our signals (a kill hits it). So a process is named
    by its pid and start time, recorded at spawn, and held through a pidfd where the kernel has
    them (Linux 5.3+): the fd names that one process for as long as we keep it, and a signal sent
    through it can never reach another. Without pidfds, the start time is compared before every
    signal and every liveness check.

    One handle is shared by threads (the runner's sampler, a fault, the teardown): the fd is used
    and closed under a lock, so no thread signals or polls an fd another one just closed (the
    kernel may already have given that number to another file), and it is closed exactly once.
    """

    MATCH_S = 0.005      # start times are in clock ticks (10 ms): equal, or another process

    def __init__(self, pid: int, create_time: float) -> None:
        self.pid, self.create_time = pid, create_time
        self._lock = threading.RLock()
        self.fd: int | None = None
        self.gone = False
        opener = getattr(os, "pidfd_open", None)
        if opener is not None:
            try:
                fd = opener(pid)
            except ProcessLookupError:
                self.gone = True
                return
            except OSError:        # ENOSYS and friends: no pidfds here, fall back on start times
                return
            if self._same():       # checked after opening, so the fd is known to name our process
                self.fd = fd
            else:
                os.close(fd)
                self.gone = True

    def _same(self) -> bool:
        t = start_time(self.pid)
        return t is not None and abs(t - self.create_time) < self.MATCH_S

    def alive(self) -> bool:
        """Running (or stopped); False once it exited, was reaped, or its pid belongs to another."""
        with self._lock:
            return self._alive()

    def _alive(self) -> bool:
        if self.gone:
            return False
        if self.fd is not None:
            poller = select.poll()
            poller.register(self.fd, select.POLLIN)
            if not poller.poll(0):           # a pidfd turns readable when its process exits
                return True
        else:
            try:
                p = psutil.Process(self.pid)
                if abs(p.create_time() - self.create_time) < self.MATCH_S and p.status() != psutil.STATUS_ZOMBIE:
                    return True
            except psutil.Error:
                pass
        self.close()
        self.gone = True
        return False

    def send(self, sig: int) -> bool:
        """Deliver `sig` to this process only; False (and nothing sent) when it is not alive."""
        with self._lock:
            return self._send(sig)

    def _send(self, sig: int) -> bool:
        if not self._alive():
            return False
        try:
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, sig)
            elif self._same():
                os.kill(self.pid, sig)
            else:
                return False
        except ProcessLookupError:
            return False
        return True

    def close(self) -> None:
        with self._lock:
            fd, self.fd = self.fd, None
            if fd is not None:
                os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except (OSError, AttributeError):     # AttributeError: __init__ never got as far as the lock
            pass


class Signals:
    """Signal delivery shared by every process handle; tracks whether SIGSTOP left it paused."""

    pid: int
    paused: bool

    def alive(self) -> bool:
        raise NotImplementedError

    def _send(self, sig: int) -> None:
        """Deliver `sig` when alive; a handle that cannot be sure the pid is still its own overrides this."""
        if self.alive():
            os.kill(self.pid, sig)

    def signal(self, sig: int) -> None:
        self._send(sig)
        if sig == signal.SIGSTOP:
            self.paused = True
        elif sig in (signal.SIGCONT, signal.SIGKILL):
            self.paused = False

    def terminate(self) -> None:
        """SIGTERM without waiting (a paused process is resumed first, or it could not exit)."""
        if self.paused:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)

    def release(self) -> None:
        """Free what the handle holds (log file, pidfd) once the process is gone."""


def stop_all(handles: list[Signals], grace: float = 3.0, kill_wait: float = 3.0,
             hurry: Callable[[], bool] = lambda: False) -> list[str]:
    """SIGTERM every process at once, SIGKILL whatever is left after `grace` s (or once `hurry()`).

    Teardown time is bounded by grace + kill_wait however many processes a run has; stopping them
    one after another would cost up to grace each. Returns the names that had to be killed.
    """
    live = [h for h in handles if h.alive()]
    for h in live:
        h.terminate()
    wait_until(lambda: hurry() or not any(h.alive() for h in live), grace, 0.02)
    killed = [h for h in live if h.alive()]
    for h in killed:
        h.signal(signal.SIGKILL)
    wait_until(lambda: not any(h.alive() for h in killed), kill_wait, 0.02)
    for h in handles:
        h.release()
    return [getattr(h, "name", str(h.pid)) for h in killed]


class Proc(Signals):
    """One named child process with its log file."""

    def __init__(self, name: str, argv: list[str], log: Path, run_id: str, owner: int | None = None,
                 detach: bool = False, extra_env: dict[str, str] | None = None) -> None:
        self.name, self.argv, self.log_path = name, argv, log
        env = dict(os.environ, **(extra_env or {}), **run_env(run_id, owner))
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

    def release(self) -> None:
        self._log.close()


Spawn = Callable[[str, list[str], Path], Signals]     # (name, argv, log) -> a started handle


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


def run_env(run_id: str, owner: int | None) -> dict[str, str]:
    """The tags every process of a run carries: the run id, and its owner by pid and start time
    (a pid alone could be a stranger's by the time `pschaos clean` asks whether the owner lives)."""
    pid = owner or os.getpid()
    started = start_time(pid) if pid > 0 else None
    env = {RUN_ENV: run_id, OWNER_ENV: str(pid), "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    if started is not None:
        env[OWNER_START_ENV] = repr(started)
    return env


def owner_alive(owner: int, started: float | None) -> bool:
    """Is the owner of a run still running? -1 is a detached `cluster up` (always alive)."""
    if owner == -1:
        return True
    if owner <= 0:
        return False
    t = start_time(owner)
    return t is not None and (started is None or abs(t - started) < ProcessRef.MATCH_S)


def orphaned(p: psutil.Process) -> bool:
    """True when the run that started `p` has no live owner any more."""
    try:
        env = p.environ()
        owner = int(env.get(OWNER_ENV, "0"))
        started = float(env[OWNER_START_ENV]) if OWNER_START_ENV in env else None
    except (psutil.Error, ValueError):
        return True
    if owner == -1:          # a detached `cluster up`: only `cluster down` or `clean --all` reap it
        return False
    return owner == p.pid or not owner_alive(owner, started)


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


def stop_tagged(pids: dict[str, int], run_id: str, timeout: float = 5.0) -> int:
    """Stop the processes of `pids` that still carry `run_id`'s tag (a pid reused by another
    process is left alone): SIGTERM, then SIGKILL after `timeout`. Returns how many were running."""
    procs = []
    for pid in sorted(set(pids.values())):
        try:
            p = psutil.Process(pid)
            if p.environ().get(RUN_ENV) == run_id:
                procs.append(p)
        except psutil.Error:
            continue
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    reap(alive)
    return len(procs)


def interrupt_group(p, grace: float) -> None:
    """SIGINT to the process group a run leads (its harness tears its cluster down), SIGKILL of
    the group if it outlives `grace`. `p`: a Popen started in its own session, or anything with
    its `pid` and `wait(timeout)`."""
    try:
        os.killpg(p.pid, signal.SIGINT)
        p.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
    except ProcessLookupError:
        pass
