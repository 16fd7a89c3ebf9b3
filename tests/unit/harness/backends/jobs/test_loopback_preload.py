"""The loopback preload: a server that binds every interface lands on 127.0.0.1 instead."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from pschaos.harness.backends.jobs import loopback
from pschaos.harness.errors import HarnessError

PROBE = """
import socket
for fam, any_addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    s = socket.socket(fam)
    if fam == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind((any_addr, 0))
    print(s.getsockname()[0])
"""


def test_any_address_binds_become_loopback(tmp_path, monkeypatch):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("needs a C compiler (cc or gcc) to build the preload")
    monkeypatch.setenv("PSCHAOS_CACHE", str(tmp_path))
    lib = loopback.preload()
    assert lib.parent == tmp_path and lib.is_file()
    assert loopback.preload() == lib             # built once, then reused
    env = {**os.environ, "LD_PRELOAD": str(lib)}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["127.0.0.1", "::ffff:127.0.0.1"]


def test_no_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PSCHAOS_CACHE", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-cc"))
    with pytest.raises(HarnessError, match="no-cc"):
        loopback.preload()
    monkeypatch.delenv("CC")
    monkeypatch.setattr(loopback.shutil, "which", lambda name: None)
    with pytest.raises(HarnessError, match="no C compiler"):
        loopback.preload()
