"""Progress of a run: a one-line bar in a terminal, plain lines in CI logs.

Shows the scenario, the phase (starting, training, healing, settling, judging), the step and the
faults so far. A terminal gets a bar redrawn in place at most ten times a second; anything else
(CI, a pipe, CI=true) gets a plain line on each phase change and every five seconds.
"""
from __future__ import annotations

import os
import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, scenario: str, steps: int, stream: TextIO | None = None, enabled: bool = True,
                 tty: bool | None = None) -> None:
        self.scenario, self.steps, self.enabled = scenario, max(steps, 1), enabled
        self.stream = stream or sys.stderr
        if tty is None:
            tty = self.stream.isatty() and not os.environ.get("CI")
        self.tty = tty
        self.phase, self.step, self.faults = "starting", 0, 0
        self._last = 0.0
        self._t0 = time.monotonic()

    def update(self, phase: str | None = None, step: int | None = None, faults: int | None = None) -> None:
        if not self.enabled:
            return
        changed = phase is not None and phase != self.phase
        self.phase = phase or self.phase
        self.step = self.step if step is None else max(step, 0)
        self.faults = self.faults if faults is None else faults
        now = time.monotonic()
        if self.tty:
            if changed or now - self._last >= 0.1:
                self._last = now
                frac = min(self.step / self.steps, 1.0)
                bar = "#" * int(frac * 24) + "." * (24 - int(frac * 24))
                self.stream.write(f"\r[{bar}] {self.scenario} {self.phase:9} step {self.step}/{self.steps} "
                                  f"faults {self.faults} {now - self._t0:5.1f}s\x1b[K")
                self.stream.flush()
        elif changed or now - self._last >= 5.0:
            self._last = now
            self.stream.write(f"[pschaos] {self.scenario}: {self.phase}, step {self.step}/{self.steps}, "
                              f"faults so far {self.faults}, t={now - self._t0:.0f}s\n")
            self.stream.flush()

    def note(self, msg: str) -> None:
        """A line that stays (a fault injected, a warning), printed above the bar."""
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(f"[pschaos] {msg}\n")
        self.stream.flush()
        if self.tty:
            self._last = 0.0
            self.update()

    def close(self) -> None:
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
