"""Keeping a job we did not write on loopback when it binds every interface.

TensorFlow's gRPC servers bind `[::]:port` whatever address TF_CONFIG gives them; this project's
rule is that every server binds 127.0.0.1. `preload()` returns a small LD_PRELOAD library
(bind_loopback.c: a bind() to the any-address binds loopback instead), built on first use with
the C compiler into a cache folder keyed by the source's hash, so an installed pschaos needs no
build step and a changed source is rebuilt.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pschaos.harness.errors import HarnessError

SOURCE = Path(__file__).with_name("bind_loopback.c")


def cache_dir() -> Path:
    base = os.environ.get("PSCHAOS_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                             os.path.expanduser("~/.cache"), "pschaos")
    return Path(base)


def preload() -> Path:
    """The built library's path (built now when it is not yet)."""
    src = SOURCE.read_bytes()
    lib = cache_dir() / f"bind_loopback-{hashlib.sha256(src).hexdigest()[:12]}.so"
    if lib.is_file():
        return lib
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise HarnessError("this job binds every interface and pschaos keeps it on loopback with a small "
                           "LD_PRELOAD library built on first use, but no C compiler was found; install one "
                           "(Debian: apt-get install gcc) or set CC")
    lib.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=lib.parent) as tmp:
        out = Path(tmp) / lib.name
        try:
            p = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(SOURCE), "-ldl"],
                               capture_output=True, text=True)
        except OSError as e:
            raise HarnessError(f"building {SOURCE.name}: the C compiler {cc} did not run ({e}); install one "
                               "(Debian: apt-get install gcc) or set CC") from e
        if p.returncode != 0:
            raise HarnessError(f"building {SOURCE.name} with {cc} failed: {p.stderr.strip()[-500:]}")
        os.replace(out, lib)          # atomic: two runs building at once both end with a whole file
    return lib
