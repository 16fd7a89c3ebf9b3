"""The Clock (harness/history/clock.py) that blocking code gets in a simulated run: the virtual time of
harness/backends/sim/vtime.py. `sleep` and `wait_until` block the calling thread while the simulation
moves on; `spawn` and `join` are the clock's threads (the runner's sampler, a flap)."""
from __future__ import annotations

from typing import Any, Callable

from pschaos.harness.backends.sim.clock import DEFAULT_EPOCH
from pschaos.harness.backends.sim.vtime import Baton, VirtualTime


class ThreadClock:
    def __init__(self, vt: VirtualTime, epoch: float = DEFAULT_EPOCH) -> None:
        self.vt, self.epoch = vt, float(epoch)

    def now(self) -> float:
        return self.epoch + self.vt.env.now

    def monotonic(self) -> float:
        return float(self.vt.env.now)

    def sleep(self, s: float) -> None:
        self.vt.sleep(max(0.0, s))

    def wait_until(self, pred: Callable[[], Any], timeout: float, period: float = 0.05) -> bool:
        """WallClock.wait_until's contract: `pred` at start + k*period and once more at the end."""
        start = self.vt.env.now
        end, k = start + timeout, 0
        while self.vt.env.now < end:
            if pred():
                return True
            k += 1
            self.vt.sleep(max(0.0, min(start + k * period, end) - self.vt.env.now))
        return bool(pred())

    def spawn(self, fn: Callable[[], Any], name: str) -> Baton:
        return self.vt.spawn(fn, name)

    def join(self, handle: Baton, timeout: float | None = None) -> bool:
        return self.vt.join(handle, timeout)

    def alive(self, handle: Baton) -> bool:
        return not handle.done.triggered


__all__ = ["ThreadClock"]
