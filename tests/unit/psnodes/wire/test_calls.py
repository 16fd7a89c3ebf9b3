"""CallPool: a caller with one call in flight at a time keeps one thread for its whole life (the
point of it: grpc's futures start a thread per call), results and errors reach the caller as a
grpc future gives them, and a closed pool's threads end."""
from __future__ import annotations

import threading
import time

import grpc
import pytest

from pschaos.psnodes.wire.calls import CallPool


class Boom(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


def test_one_call_at_a_time_runs_on_one_thread():
    pool = CallPool("t")
    names = set()

    def call(i: int) -> int:
        names.add(threading.current_thread().name)
        return i * 2

    assert [pool.submit(call, i).result(timeout=5) for i in range(300)] == [i * 2 for i in range(300)]
    assert pool.threads == 1 and names == {"t-1"}
    pool.close()


def test_calls_in_flight_together_get_a_thread_each():
    pool = CallPool("t")
    gate = threading.Event()
    futs = [pool.submit(gate.wait, 5) for _ in range(3)]
    assert pool.threads == 3 and not any(f.done() for f in futs)
    gate.set()
    assert all(f.result(timeout=5) for f in futs)
    pool.close()


def test_an_error_is_raised_by_result_and_a_slow_call_times_out_as_grpc_says():
    pool = CallPool("t")

    def fail():
        raise Boom()

    with pytest.raises(Boom):
        pool.submit(fail).result(timeout=5)
    slow = pool.submit(time.sleep, 0.3)
    with pytest.raises(grpc.FutureTimeoutError):
        slow.result(timeout=0.01)
    assert not slow.done()
    assert slow.result(timeout=5) is None and slow.done()
    pool.close()


def test_a_closed_pool_refuses_calls_and_its_threads_end():
    pool = CallPool("closing")
    pool.submit(lambda: None).result(timeout=5)
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(lambda: None)
    end = time.monotonic() + 5
    while any(t.name.startswith("closing-") for t in threading.enumerate()) and time.monotonic() < end:
        time.sleep(0.01)
    assert not any(t.name.startswith("closing-") for t in threading.enumerate())
