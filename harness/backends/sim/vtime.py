"""Blocking code in virtual time: the runner, the faults and the workers, unchanged, on SimPy's clock.

The harness's runner, its fault threads (flap) and psnodes' worker and client are written for
the wall clock: they call `sleep`, wait for replies, and run in threads. To run them in virtual
time without a second copy of their logic, each runs as a *greenlet* (a coroutine with its own
stack, switched explicitly, all in one OS thread) that holds a *baton*: one runs at a time, and
one that waits (for a virtual duration or for a SimPy event) hands the baton on. When none is
ready, the waiting one steps the SimPy Environment until one is; those woken at the same virtual
instant run in the order they were woken. So the interleaving is a function of the seed alone,
never of the OS scheduler: a seed replays a run byte for byte, and virtual time passes only when
every one waits (a run is as fast as its computation, not its sleeps).

Why greenlets and not OS threads: the first version handed a real thread's baton over with
threading.Event, and on a 2-core machine a third of a soak's wall time went to those hand-offs
(a futex wake and a GIL transfer each, thousands per simulated second); a greenlet switch is a
stack swap of about a microsecond. The blocking code does not change: `sleep` and a reply wait
look the same from inside.

The rule for code running here: wait only through this module (`sleep`, `wait_event`, `join`,
`spawn`), never on an OS primitive (threading.Event.wait, queue.get, a socket): that would block
the one OS thread, and with it the whole simulation.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable

import greenlet
import simpy

from pschaos.harness.errors import HarnessError


class Closed(BaseException):
    """The simulation ended: a thread still waiting for its turn unwinds (BaseException, so no
    `except Exception` in the code it runs swallows it)."""


class Stalled(HarnessError):
    """Nothing can run: every thread waits and the Environment has no event left, or a thread
    blocked outside the baton."""


class SimulationError(HarnessError):
    """A simulated process crashed (a bug in the twin, never a fault of the scenario): the run
    stops in the runner's thread with the cause, rather than hanging or going on without it."""


class Baton:
    """One simulated thread: its greenlet, its end event, and its result or error."""

    def __init__(self, name: str, glet: greenlet.greenlet | None = None) -> None:
        self.name = name
        self.glet = glet
        self.done: simpy.Event | None = None
        self.error: BaseException | None = None
        self.result: Any = None


class VirtualTime:
    """The baton scheduler over one Environment (module docstring). The thread that creates it
    holds the baton first."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self._ready: list[tuple[float, int, Baton]] = []
        self._seq = itertools.count()
        self.main = Baton("main", greenlet.getcurrent())
        self._batons: dict[greenlet.greenlet, Baton] = {self.main.glet: self.main}
        self.error: BaseException | None = None
        self._all: list[Baton] = []
        self.closed = False

    # ----------------------------------------------------------- waiting
    def current(self) -> Baton:
        b = self._batons.get(greenlet.getcurrent())
        if b is None:
            raise HarnessError("this code is not run by the virtual clock (another OS thread or a greenlet "
                               "of its own): start it with clock.spawn(...)")
        return b

    def wait_event(self, ev: simpy.Event) -> Any:
        """Block this thread until `ev` is processed; its value (or its failure, raised)."""
        me = self.current()
        if not ev.processed:
            ev.callbacks.append(lambda e: self._on_done(e, me))
            self._switch(me)
        if not ev.ok:
            ev.defused = True
            raise ev.value
        return ev.value

    def sleep(self, s: float) -> None:
        if s < 0:
            raise ValueError(f"sleep length must be non-negative, got s={s}")
        self.wait_event(self.env.timeout(s))

    def _on_done(self, ev: simpy.Event, b: Baton) -> None:
        if not ev.ok:
            ev.defused = True          # the waiting thread receives the failure (wait_event raises it)
        self._wake(b)

    def _wake(self, b: Baton) -> None:
        heapq.heappush(self._ready, (self.env.now, next(self._seq), b))

    def _next(self) -> Baton:
        """The next thread to run, stepping the Environment until one is ready. A crashed
        simulated process or a stall hands the baton to the main thread, which raises it."""
        if self.closed:
            raise Closed()
        while not self._ready:
            if self.error is not None:
                return self.main
            if self.env.peek() == float("inf"):
                self.error = Stalled("every thread waits and no simulated event is left: nothing can happen any more")
                return self.main
            try:
                self.env.step()
            except BaseException as e:  # noqa: BLE001 - a simulated process crashed: fatal, see _switch
                self.error = e
                return self.main
        return heapq.heappop(self._ready)[2]

    def _switch(self, me: Baton) -> None:
        nxt = self._next()
        if nxt is not me:
            try:
                nxt.glet.switch()
            except greenlet.GreenletExit:
                # thrown only when this greenlet is garbage-collected, which _all prevents while
                # the simulation lives: it was abandoned, so nothing may step it again
                self.closed = True
                raise Closed() from None
            if self.closed:
                raise Closed()
        if self.error is not None and me is self.main:
            if isinstance(self.error, (Stalled, KeyboardInterrupt, SystemExit)):
                raise self.error
            raise SimulationError(f"a simulated process crashed: {type(self.error).__name__}: {self.error}") \
                from self.error

    def close(self) -> None:
        """End the simulation: every simulated thread still waiting for its turn unwinds (Closed),
        here and now, so its `finally` blocks run before the caller goes on."""
        self.closed = True
        me = greenlet.getcurrent()
        for b in self._all:
            g = b.glet
            if g is not None and g is not me and g and not g.dead:   # started and suspended
                g.parent = me
                g.throw(Closed())

    # ----------------------------------------------------------- threads
    def spawn(self, fn: Callable[[], Any], name: str) -> Baton:
        """Run `fn` as a new simulated thread under the baton; it starts when the caller next waits."""
        b = Baton(name)
        b.done = self.env.event()
        self._all.append(b)

        def run(*_: Any) -> None:
            # *_: a greenlet first entered by another one's return (see the end) receives its value
            if self.closed:
                return
            try:
                b.result = fn()
            except (Closed, greenlet.GreenletExit):
                return
            except (KeyboardInterrupt, SystemExit) as e:
                # Ctrl-C (or the runner's SIGTERM handler) lands in whichever greenlet runs; it is
                # the run's to handle, not this simulated thread's: the main greenlet raises it
                b.error = self.error = e
                b.glet.parent = self.main.glet
                return
            except BaseException as e:  # noqa: BLE001 - kept for join(), as a thread's would be
                b.error = e
            if self.closed:              # the run ended meanwhile: never step the simulation again
                return
            b.done.succeed()
            # hand the baton on as this greenlet ends: its return switches to its parent
            b.glet.parent = self._next().glet

        b.glet = greenlet.greenlet(run, parent=self.main.glet)
        self._batons[b.glet] = b
        self._wake(b)
        return b

    def join(self, b: Baton, timeout: float | None = None) -> bool:
        """Wait until `b`'s thread ended (True) or `timeout` virtual seconds passed (False)."""
        if b.done.processed:
            return True
        evs = [b.done] if timeout is None else [b.done, self.env.timeout(timeout)]
        self.wait_event(simpy.AnyOf(self.env, evs))
        return b.done.processed or b.done.triggered

    def run_process(self, gen) -> Any:
        """Run a SimPy generator as a process and block this thread until it returns (its value)."""
        return self.wait_event(self.env.process(gen))


__all__ = ["Baton", "Closed", "SimulationError", "Stalled", "VirtualTime"]
