"""Time as a parameter: the runner, the history, the faults and the nemesis loop ask a Clock.

On the process and docker backends that is the wall clock; the SimPy backend hands out its
virtual clock, so the same schedule, observation and judging code run in simulated time. A
backend says which clock it keeps in `backend.clock`; `clock_of` falls back to the wall clock.
"""
from __future__ import annotations

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


WALL = WallClock()


def clock_of(backend: Any) -> Clock:
    """The clock a backend keeps, or the wall clock for one that names none."""
    return getattr(backend, "clock", None) or WALL


__all__ = ["Clock", "WallClock", "WALL", "clock_of"]
