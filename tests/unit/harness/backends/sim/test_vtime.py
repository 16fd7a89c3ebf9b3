"""Blocking threads in virtual time: exact interleavings, joins, SimPy processes, stalls."""
from __future__ import annotations

import time

import pytest
import simpy

from pschaos.harness.history.clock import Clock
from pschaos.harness.backends.sim.threadclock import ThreadClock
from pschaos.harness.backends.sim.vtime import Stalled, VirtualTime


def world() -> tuple[simpy.Environment, VirtualTime, ThreadClock]:
    env = simpy.Environment()
    vt = VirtualTime(env)
    return env, vt, ThreadClock(vt)


def test_threads_interleave_by_virtual_time_then_by_wake_order():
    env, vt, clock = world()
    assert isinstance(clock, Clock)
    trace = []

    def worker(name, period, n):
        for i in range(n):
            trace.append((clock.monotonic(), name, i))
            clock.sleep(period)

    a = clock.spawn(lambda: worker("a", 0.3, 4), "a")
    b = clock.spawn(lambda: worker("b", 0.2, 5), "b")
    t0 = time.monotonic()
    assert clock.join(a) and clock.join(b)
    assert time.monotonic() - t0 < 5             # virtual seconds are not slept
    assert [(round(t, 6), n) for t, n, _ in trace] == [
        (0, "a"), (0, "b"), (0.2, "b"), (0.3, "a"), (0.4, "b"), (0.6, "a"), (0.6, "b"), (0.8, "b"), (0.9, "a")]
    assert env.now == pytest.approx(1.2)


def test_join_with_a_timeout_and_results_and_errors():
    env, vt, clock = world()
    slow = clock.spawn(lambda: clock.sleep(10), "slow")
    assert clock.join(slow, 2.0) is False and env.now == pytest.approx(2.0) and clock.alive(slow)
    assert clock.join(slow) is True and env.now == pytest.approx(10.0)

    def boom():
        clock.sleep(1)
        raise ValueError("x")
    h = clock.spawn(boom, "boom")
    clock.join(h)
    assert isinstance(h.error, ValueError)


def test_a_thread_waits_for_a_simpy_process_and_simpy_runs_meanwhile():
    env, vt, clock = world()
    ticks = []

    def ticker():
        while True:
            ticks.append(env.now)
            yield env.timeout(1)
    env.process(ticker())

    def proc():
        yield env.timeout(3.5)
        return "done"
    assert vt.run_process(proc()) == "done" and env.now == 3.5 and ticks == [0, 1, 2, 3]


def test_wait_until_checks_on_period_boundaries_and_at_the_deadline():
    env, vt, clock = world()
    seen = []
    assert clock.wait_until(lambda: seen.append(env.now) or False, 1.0, 0.3) is False
    assert [round(t, 6) for t in seen] == [0, 0.3, 0.6, 0.9, 1.0]
    assert clock.wait_until(lambda: env.now >= 1.6, 5, 0.25) is True and env.now == pytest.approx(1.75)


def test_nothing_left_to_happen_is_a_stall_not_a_hang():
    env, vt, clock = world()
    with pytest.raises(Stalled):
        vt.wait_event(env.event())          # never triggered, and nothing else scheduled


def test_a_crashed_simulated_process_stops_the_run_in_the_main_thread():
    from pschaos.harness.backends.sim.vtime import SimulationError

    env, vt, clock = world()

    def bad():
        yield env.timeout(1)
        raise KeyError("bug")
    env.process(bad())
    with pytest.raises(SimulationError, match="bug"):
        clock.sleep(5)


def test_a_process_failure_reaches_the_thread_that_waits_for_it():
    env, vt, clock = world()

    def bad():
        yield env.timeout(1)
        raise KeyError("mine")
    with pytest.raises(KeyError, match="mine"):
        vt.run_process(bad())
    clock.sleep(1)                # the simulation goes on: the failure was handled by its waiter


def test_a_spawned_thread_that_waits_forever_stalls_the_main_thread_loudly():
    env, vt, clock = world()
    h = clock.spawn(lambda: vt.wait_event(env.event()), "stuck")
    with pytest.raises(Stalled):
        clock.join(h)


def test_a_thread_that_ends_at_once_hands_the_baton_to_one_that_never_ran():
    """A greenlet that returns without waiting passes the baton by ending: the next one may not
    have started yet (a pool task that finds its worker dead returns at once)."""
    env, vt, clock = world()
    order = []
    a = clock.spawn(lambda: order.append("a") or 1, "a")
    b = clock.spawn(lambda: order.append("b") or 2, "b")
    assert clock.join(a) and clock.join(b) and order == ["a", "b"] and (a.result, b.result) == (1, 2)


def test_ctrl_c_inside_a_simulated_thread_stops_the_run_in_the_main_one():
    env, vt, clock = world()

    def worker():
        clock.sleep(1)
        raise KeyboardInterrupt        # what the SIGINT handler raises in whichever greenlet runs
    clock.spawn(worker, "w")
    clock.spawn(lambda: [clock.sleep(0.1) for _ in range(100)], "busy")
    with pytest.raises(KeyboardInterrupt):
        clock.sleep(50)
    assert env.now == pytest.approx(1.0)


def test_closing_unwinds_every_waiting_thread_and_runs_its_finally():
    env, vt, clock = world()
    unwound = []

    def waiter(name):
        try:
            clock.sleep(100)
        finally:
            unwound.append(name)
    for n in ("x", "y"):
        clock.spawn(lambda n=n: waiter(n), n)
    clock.sleep(1)
    vt.close()
    assert sorted(unwound) == ["x", "y"]
