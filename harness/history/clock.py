"""Time as a parameter: the runner, the history, the faults and the nemesis loop ask a Clock.

On the process and docker backends that is the wall clock; the SimPy backend hands out its
virtual clock, so the same schedule, observation and judging code run in simulated time. A
backend says which clock it keeps in `backend.clock`; `clock_of` falls back to the wall clock.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch: the `t` of history events (the wall clock's time.time())."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes back: schedules and deadlines."""
        ...

    def sleep(self, s: float) -> None:
        """Let `s` seconds pass on this clock."""
        ...

    def wait_until(self, pred: Callable[[], Any], timeout: float, period: float = 0.05) -> bool:
        """Check `pred` every `period` s until it holds (True) or `timeout` s passed (its last
        value, checked once more at the deadline)."""
        ...

    def spawn(self, fn: Callable[[], Any], name: str) -> Any:
        """Run `fn` beside the caller (a thread on this clock); a handle for `join` and `alive`."""
        ...

    def join(self, handle: Any, timeout: float | None = None) -> bool:
        """Wait for a spawned `fn` to end, at most `timeout` s on this clock; True when it ended."""
        ...

    def alive(self, handle: Any) -> bool:
        """Whether a spawned `fn` still runs."""
        ...


class WallClock:
    """The real clock of this machine."""

    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, s: float) -> None:
        time.sleep(s)

    def wait_until(self, pred: Callable[[], Any], timeout: float, period: float = 0.05) -> bool:
        end = self.monotonic() + timeout
        while self.monotonic() < end:
            if pred():
                return True
            self.sleep(period)
        return bool(pred())

    def spawn(self, fn: Callable[[], Any], name: str) -> threading.Thread:
        t = threading.Thread(target=fn, name=name, daemon=True)
        t.start()
        return t

    def join(self, handle: threading.Thread, timeout: float | None = None) -> bool:
        handle.join(timeout)
        return not handle.is_alive()

    def alive(self, handle: threading.Thread) -> bool:
        return handle.is_alive()


WALL = WallClock()


def clock_of(backend: Any) -> Clock:
    """The clock a backend keeps, or the wall clock for one that names none."""
    return getattr(backend, "clock", None) or WALL


__all__ = ["Clock", "WallClock", "WALL", "clock_of"]
