"""The twin's clock: harness/history/clock.py's Clock over a SimPy Environment's virtual time.

Reading time is the same as on the wall clock: `now()` is seconds since the epoch (a fixed base
plus `env.now`, so histories carry plausible wall times and a seed replays them byte for byte) and
`monotonic()` is `env.now` itself.

Waiting is not. A SimPy process is a generator: time passes only when it yields an event to the
Environment, so a blocking `sleep` cannot exist inside one. `sleep` and `wait_until` are therefore
*generator forms*, used with `yield from` inside a SimPy process:

    def elector(env, clock):
        yield from clock.sleep(0.5)
        ok = yield from clock.wait_until(lambda: etcd.get(key) is not None, timeout=2.0)

Why `yield from` rather than returning events to `yield`: `wait_until` has to poll, so it is a
loop and must be a generator anyway; one idiom for both keeps call sites uniform, composes (a
helper that waits is itself `yield from`-ed) and costs no extra SimPy process, unlike wrapping the
loop in `env.process` to `yield` it. Both methods check eagerly, at the call, that a SimPy process
is running, so code written for the blocking wall clock (the Runner today) fails loudly here
instead of silently not waiting. Forgetting `yield from` inside a process still yields an unused
generator (no wait): that is the one rule of this clock.
"""
from __future__ import annotations

from typing import Any, Callable, Generator

import simpy

from pschaos.harness.errors import HarnessError

# 2026-01-01T00:00:00Z: a fixed, plausible wall time for virtual t = 0 (never read from this machine).
DEFAULT_EPOCH = 1_767_225_600.0

Wait = Generator[simpy.Event, Any, Any]


class SimClockError(HarnessError):
    """A SimClock wait was called outside a SimPy process."""


class SimClock:
    """Virtual time of `env`. `now` and `monotonic` work anywhere; `sleep` and `wait_until` are
    generators for `yield from` inside a SimPy process (see the module docstring)."""

    def __init__(self, env: simpy.Environment, epoch: float = DEFAULT_EPOCH) -> None:
        self.env = env
        self.epoch = float(epoch)

    def now(self) -> float:
        """Seconds since the Unix epoch: `epoch + env.now` (the `t` of history events)."""
        return self.epoch + self.env.now

    def monotonic(self) -> float:
        """Virtual seconds since the Environment's origin: schedules and deadlines."""
        return float(self.env.now)

    def _in_process(self, what: str) -> None:
        if self.env.active_process is None:
            raise SimClockError(f"SimClock.{what} was called outside a SimPy process: it is a "
                                f"generator; call it as `yield from clock.{what}(...)` inside a "
                                f"process started with env.process(...)")

    def sleep(self, s: float) -> Wait:
        """`yield from clock.sleep(s)`: let `s` virtual seconds pass (0 yields to others at this
        instant; negative raises ValueError, as time.sleep does)."""
        self._in_process("sleep")
        if s < 0:
            raise ValueError(f"sleep length must be non-negative, got s={s}")
        return self._sleep(s)

    def _sleep(self, s: float) -> Wait:
        yield self.env.timeout(s)

    def wait_until(self, pred: Callable[[], Any], timeout: float, period: float = 0.05) -> Wait:
        """`ok = yield from clock.wait_until(pred, timeout, period)`: check `pred` at start,
        start + period, start + 2·period, ... and once more at exactly start + timeout; True as soon
        as it holds, else its last value. Check times are start + k·period (no drift), so traces
        are exact."""
        self._in_process("wait_until")
        if period <= 0:
            raise ValueError(f"wait_until period must be positive, got period={period}")
        return self._wait_until(pred, timeout, period)

    def _wait_until(self, pred: Callable[[], Any], timeout: float, period: float) -> Wait:
        start = self.env.now
        end, t = start + timeout, start
        k = 0
        while t < end:            # the loop follows the planned times, not env.now's rounding
            if pred():
                return True
            k += 1
            t = min(start + k * period, end)
            yield self.env.timeout(max(0.0, t - self.env.now))
        return bool(pred())


__all__ = ["DEFAULT_EPOCH", "SimClock", "SimClockError"]
