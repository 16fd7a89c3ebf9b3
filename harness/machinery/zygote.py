"""A zygote: imports PyTorch, gRPC, numpy and psnodes once, then forks nodes and workers on request.

On a small machine a run's start is CPU-bound: every worker importing torch and every node
importing gRPC costs seconds when nine processes start at once. Forked from a warm zygote, a
process is ready in milliseconds, and a restarted node (a healed kill) comes back as fast.
Nothing gRPC or CUDA is *created* here before a fork, only imported, which keeps forking safe.

Protocol (JSON lines): the harness writes {"id", "module", "argv", "log"} to stdin; the zygote
answers {"id", "pid", "ctime"} on stdout. It reaps its children, and exits when stdin closes (the
children live on; the harness or `pschaos clean` stops them).

`ctime` is the child's start time (psutil create_time). Once the zygote reaps a child its pid can
be reused by any process, so the harness names a child by (pid, ctime), never the pid alone (see
procs.ProcessRef). Reaping is held from the fork until ctime is read, so the child cannot be
reaped, and its pid reused, before its start time is known.
"""
from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import traceback

import psutil

PRELOAD = ("numpy", "grpc", "torch", "pschaos.psnodes.serve", "pschaos.psnodes.worker")


_holding = False      # set while a fork's start time is being read: reap nothing until then


def _reap(signum=None, frame=None) -> None:
    # Python runs signal handlers in the main thread between bytecodes, the thread that sets
    # _holding, so this check cannot race the fork below.
    if _holding:
        return
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _child(req: dict) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    code = 1
    try:
        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        sys.argv = [req["module"], *req["argv"]]
        code = importlib.import_module(req["module"]).main(req["argv"]) or 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child reports and exits; it must never return here
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


REAP_EVERY_S = 0.5    # the loop also reaps when no request came for this long (see _requests)


def _requests(fd: int):
    """The request lines on `fd`, read unbuffered, reaping between them: a SIGCHLD that the kernel
    hands to a thread other than the main one (an imported library's) only flags the handler,
    which Python runs when the main thread next executes bytecode, so a blocked read left an
    exited child a zombie until the next request (a test saw one unreaped for 5 s)."""
    buf = b""
    while True:
        ready, _, _ = select.select([fd], [], [], REAP_EVERY_S)
        if not ready:
            _reap()
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line


def main() -> int:
    global _holding
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # Ctrl-C is the harness's to handle, even mid-import
    for mod in PRELOAD:
        importlib.import_module(mod)
    signal.signal(signal.SIGCHLD, _reap)
    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in _requests(sys.stdin.fileno()):
        req = json.loads(line)
        _holding = True
        try:
            pid = os.fork()
            if pid == 0:
                _child(req)
            ctime = psutil.Process(pid).create_time()     # a zombie still has it; nobody reaped it yet
        finally:
            _holding = False
        _reap()                                          # whatever exited while reaping was held
        print(json.dumps({"id": req["id"], "pid": pid, "ctime": ctime}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
