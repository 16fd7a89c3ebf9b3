"""Fault-free runs shared by the scenarios of one session that ask for the same one.

A training job's resume-exact compares the faulted run's final model with the model of the same
job run without faults (same seed, same options); psnodes' converge-baseline compares losses with
such a run. The library's TensorFlow scenarios differ only in their faults, so in one pytest
session six of them asked for the same fault-free run, and each made it again (a third of their
time). Here such a run is made once, under a lock every xdist worker shares, and copied into
each asking run's folder with a note naming where it was made.

Reuse is narrow on purpose: within the session that made it (the pytest plugin opens a store of
its own for each session and removes it at the end, so code changed between sessions is never
judged by an old run, and two sessions at once never share or empty each other's), only
a run that passed (one that failed or was unknown is made again by the next scenario that asks:
a training job refuses a baseline that did not pass, and one bad run must not leave every
scenario of that key unknown), and only for the same scenario less its name and description, the same seed
and backend, the same job interpreter and the same source file of the system's class (within one session the
code does not change; the digest is a guard, not a hash of every file the job runs).
"""
from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Callable

from pschaos.harness.machinery.registry import RUN_MARKER

COPIED = ("report.json", "history.jsonl", "summary.md")   # what a reused run's folder gets (logs stay put)
NOTE = "reused-from.json"     # in a folder that got a copy: where the run was made
MADE = "made.json"            # in the store's copy, written last


def _code_of(system: object) -> str:
    """A digest of the system's own source file (a job class, an adapter, psnodes' system)."""
    cls = getattr(system, "job", None) or getattr(system, "adapter", None) or type(system)
    try:
        return hashlib.sha256(Path(inspect.getsourcefile(cls) or "").read_bytes()).hexdigest()[:16]
    except (OSError, TypeError):
        return "unknown-source"


def key_of(sc, seed: int, backend: str, system: object) -> str:
    """What makes two fault-free runs the same run."""
    what = {"scenario": sc.model_dump(mode="json", exclude={"name", "description"}), "seed": seed,
            "backend": backend, "code": _code_of(system),
            "tf_python": os.environ.get("PSCHAOS_TF_PYTHON", "")}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:20]


class SharedRuns:
    """Runs by key, in `root`: a copy of each run's evidence in root/<key>/ (the folder it was made
    in may be made again by another run of the same name), and a lock per key."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def run(self, key: str, folder: Path, make: Callable[[Path], dict]) -> dict:
        """The report of the run `key`, in `folder`: made there by `make(folder)` the first time
        (and kept when it passed), copied there after that. Two
        workers that ask at once: the second waits for the first's run, then copies it."""
        self.root.mkdir(parents=True, exist_ok=True)
        kept = self.root / key
        with open(self.root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)      # released when the file closes, also on a crash
            made_in = _made_in(kept)
            if made_in is not None:
                _copy(kept, folder)
                (folder / NOTE).write_text(json.dumps(
                    {"made_in": made_in, "key": key, "why": "the same run (scenario less its name and description, "
                     "seed, backend, system code) was made earlier in this session"}, indent=1) + "\n")
                return {**json.loads((folder / "report.json").read_text()), "reused_from": made_in}
            rep = make(folder)
            if rep.get("verdict") == "pass":     # a failed or unknown one is made again by the next who asks
                _copy(folder, kept)
                (kept / MADE).write_text(json.dumps({"made_in": str(Path(folder).resolve())}))
            return rep


def _made_in(kept: Path) -> str | None:
    """Where the kept run was made, when its copy is whole (the note is written last)."""
    try:
        made = json.loads((kept / MADE).read_text())["made_in"]
    except (OSError, ValueError, KeyError):
        return None
    return made if all((kept / name).is_file() for name in COPIED[:2]) else None


def _copy(src: Path, dst: Path) -> None:
    """The run's files into `dst`, after what an earlier run left there of the same names (and
    of its report pages, its note, and a run folder a run made): nothing else in it is touched."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in (*COPIED, NOTE, MADE, "report.html", "junit.xml"):
        if (dst / name).is_file():
            (dst / name).unlink()
    if (dst / "run" / RUN_MARKER).is_file():
        shutil.rmtree(dst / "run", ignore_errors=True)
    for name in COPIED:
        if (src / name).is_file():
            shutil.copy2(src / name, dst / name)


def open_session(parent: Path) -> Path:
    """The folder of a new session's store under `parent`, made on its first run (a pytest
    session that runs no scenario leaves nothing). Two sessions at once each have their own:
    neither empties the other's. Stores of sessions whose process is gone (killed) are swept."""
    parent = Path(parent).resolve()
    if parent.is_dir():
        for old in parent.glob("session-*"):
            if not _alive(old.name):
                shutil.rmtree(old, ignore_errors=True)
    return parent / f"session-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _alive(name: str) -> bool:
    try:
        os.kill(int(name.split("-")[1]), 0)
    except (IndexError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def close_session(root: Path) -> None:
    """The session is over: its store goes (each run that used a run keeps its own copy), and
    the parent folder too when no other session's store is left in it."""
    shutil.rmtree(root, ignore_errors=True)
    try:
        root.parent.rmdir()
    except OSError:
        pass
