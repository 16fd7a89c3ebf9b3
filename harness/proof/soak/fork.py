"""Simulated soak runs forked from one warm process, not started from a cold interpreter each.

A simulated run of nemesis-soak costs a few seconds of computation, and a fresh `pschaos run`
spends about 2.4 s more importing PyTorch, numpy, SimPy and the harness before its first event:
across a thousand seeds that is most of an hour of a 2-core machine. The soak therefore starts
one multiprocessing *forkserver* that imports all of it once, and forks each run from it. A run
keeps what made a subprocess per run safe: its own process and session (a crash or a hang costs
one run; Ctrl-C reaches its process group once), its own log file, its exit code, and the same
`pschaos run` command line, so its report is the one `pschaos run` writes and prints how to
rerun it. Only the process backend's runs stay cold subprocesses: they start real clusters, and
their seconds go there, not to imports.
"""
from __future__ import annotations

import multiprocessing
import os
import runpy
import sys
from pathlib import Path

CLI_MODULE = "pschaos.harness.commands.cli"      # what `pschaos` runs (`python -m` of it, or forked)
# what a run imports, once in the forkserver; not CLI_MODULE itself, which each run executes as
# its __main__ (runpy warns when the module it runs was imported before)
PRELOAD = ["numpy", "torch", "simpy", "greenlet", "pschaos.harness.run.runner", "pschaos.harness.run.judge",
           "pschaos.harness.backends.sim.backend", "pschaos.harness.backends.sim.workers", "pschaos.psnodes.worker", "pschaos.psnodes.client.client", "pschaos.reports.aggregate"]

_ctx: multiprocessing.context.BaseContext | None = None


def _context() -> multiprocessing.context.BaseContext:
    global _ctx
    if _ctx is None:
        _ctx = multiprocessing.get_context("forkserver")
        _ctx.set_forkserver_preload(PRELOAD)
    return _ctx


def _child(argv: list[str], log: str, in_session) -> None:
    """One run, in a fresh session, its output in `log`; exits with `pschaos run`'s code."""
    os.setsid()
    in_session.set()                 # only now may the soak signal the run's process group
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    rc = 1
    try:
        # the command line itself, as `python -m CLI_MODULE argv...` would run it (the module was
        # imported once in the forkserver, so this costs no imports); the soak depends on the
        # command line's words, not on the CLI's code
        sys.argv = [CLI_MODULE, *argv]
        runpy.run_module(CLI_MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as e:           # the CLI's exit code; argparse's refusal is 2, as on its own
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc if isinstance(rc, int) else 1)


class ForkedRun:
    """subprocess.Popen's `pid`, `poll`, `wait` and `returncode` for one forked run, so the soak
    drives both kinds of run the same way."""

    def __init__(self, argv: list[str], log: Path) -> None:
        ctx = _context()
        in_session = ctx.Event()
        self.proc = ctx.Process(target=_child, args=(argv, str(log), in_session), daemon=False)
        self.proc.start()
        self.pid = self.proc.pid
        # a Ctrl-C or a timeout signals the run's process group: wait until it has one, as
        # Popen(start_new_session=True) has before it returns
        while not in_session.wait(0.05) and self.proc.exitcode is None:
            pass

    @property
    def returncode(self) -> int | None:
        return self.proc.exitcode      # -N when signal N killed it, as Popen has it

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        self.proc.join(timeout)
        if self.proc.exitcode is None:
            raise subprocess.TimeoutExpired(f"pschaos run (pid {self.pid})", timeout)
        return self.proc.exitcode


__all__ = ["CLI_MODULE", "ForkedRun", "PRELOAD"]
