"""A Ctrl-C that lands inside a finalizer still stops the run.

Python runs a signal handler in whatever the main thread is executing; if that is a `__del__`
(the garbage collector closing an HTTP connection's socket), the KeyboardInterrupt the handler
raises is printed as "Exception ignored in ..." and dropped. The interrupt soak saw exactly that
in CI: a SIGINT to the run's process group 3.7 s into the start was swallowed in
http.client's close, the run went on against its killed nodes and exited 1, 29.7 s later. The
runner's handler re-sends the signal until the run is tearing down, so one lands in plain code.
"""
from __future__ import annotations

import gc
import os
import signal
import time
from types import SimpleNamespace

import pytest

from pschaos.harness.run.runner import Runner


class _SignalsInFinalizer:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):        # the handler runs here, inside __del__
            pass


def _runner() -> Runner:
    r = Runner.__new__(Runner)         # only what the handler reads
    r.tearing_down = False
    r.backend = SimpleNamespace(hurry=False)
    return r


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")     # the lost one, as in CI
def test_an_interrupt_swallowed_by_a_finalizer_is_delivered_again() -> None:
    r = _runner()
    prev = signal.signal(signal.SIGINT, r._on_term)
    try:
        with pytest.raises(KeyboardInterrupt):
            obj = _SignalsInFinalizer()
            del obj                       # "Exception ignored in ... __del__": the first one is lost
            gc.collect()
            end = time.monotonic() + 5.0
            while time.monotonic() < end:
                time.sleep(0.01)
    finally:
        r.tearing_down = True             # no re-send after the test
        signal.signal(signal.SIGINT, prev)


def test_once_tearing_down_a_signal_only_hurries() -> None:
    r = _runner()
    r.tearing_down = True
    r._on_term(signal.SIGINT, None)
    assert r.backend.hurry is True
