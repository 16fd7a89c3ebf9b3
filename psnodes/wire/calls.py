"""gRPC calls in flight without a thread started per call.

grpc's `multicallable.future()` hands each call to its channel's "spin" thread, and that thread
exits as soon as the channel has no call left: on a channel with one call at a time (a primary's
sender to one replica, its heartbeats every 50 ms) every call starts a thread of its own. That
doubled what a call costs: 1.07 ms of CPU per call (client and server together) against 0.50 ms
for a blocking call, measured on this project's 2-core CI machine
(docs/measurements/suite-time.md). A `CallPool` keeps its threads: each makes blocking calls
and hands back a `CallFuture`, whose `result(timeout)` raises grpc.FutureTimeoutError as a grpc
future does.

What it cannot do is cancel a call on the wire (a blocking call offers no handle), so it serves
callers that never cancel: the replication sender waits every call out (psnodes/replication/replication.py).
The PS client, whose deposed-primary watch cancels a call so that the old primary's wait for it
ends (psnodes/server/calls.py), keeps grpc's futures.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable

import grpc


class CallFuture:
    """A call's outcome as a grpc future shows it: `result(timeout)`, `done()`."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def _finish(self, value: Any, error: BaseException | None) -> None:
        self._value, self._error = value, error
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> Any:
        """The reply, or the call's grpc.RpcError raised; grpc.FutureTimeoutError when it is
        still in flight after `timeout` seconds (None: wait for it)."""
        if not self._done.wait(timeout):
            raise grpc.FutureTimeoutError()
        if self._error is not None:
            raise self._error
        return self._value


_CLOSE = object()


class CallPool:
    """Threads that make blocking calls, started as needed and kept while the pool is open.

    A thread is started only when every thread of the pool is busy, so a caller with one call
    in flight at a time runs on one thread for its whole life. `close()` lets every thread end
    once its call is over (they are daemons: a process that exits does not wait for them)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> CallFuture:
        """Run `fn(*args, **kwargs)` (a blocking gRPC call) on a pool thread."""
        fut = CallFuture()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"call pool {self.name} is closed")
            if self._idle:
                self._idle -= 1           # an idle thread takes this job
            else:
                self._threads += 1
                threading.Thread(target=self._serve, name=f"{self.name}-{self._threads}", daemon=True).start()
            # under the lock: a close() cannot queue its ends ahead of a job it did not refuse
            self._jobs.put((fut, fn, args, kwargs))
        return fut

    def close(self) -> None:
        """No more calls; each thread ends after its current one."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = self._threads
        for _ in range(threads):
            self._jobs.put(_CLOSE)

    @property
    def threads(self) -> int:
        """Threads started so far (tests: a caller with one call at a time needs one)."""
        return self._threads

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _CLOSE:
                return
            fut, fn, args, kwargs = job
            value, error = None, None
            try:
                value = fn(*args, **kwargs)
            except BaseException as e:  # noqa: BLE001 - the caller gets it from result()
                error = e
            with self._lock:
                self._idle += 1           # before the caller wakes: its next call finds this thread
            fut._finish(value, error)
            del job, fut, fn, args, kwargs, value, error   # an idle thread holds no request nor reply


__all__ = ["CallFuture", "CallPool"]
