"""pschaos.harness.backends.sim.clock: virtual time read like the wall clock, waited on with `yield from`."""
import pytest
import simpy

from pschaos.harness.history.clock import Clock
from pschaos.harness.backends.sim.clock import DEFAULT_EPOCH, SimClock, SimClockError


def test_reads_virtual_time_from_a_fixed_epoch():
    env = simpy.Environment()
    clock = SimClock(env)
    assert not isinstance(clock, Clock)      # generator waits: SimPy processes only; ThreadClock is the runner's
    assert (clock.now(), clock.monotonic()) == (DEFAULT_EPOCH, 0.0)
    env.run(until=2.5)
    assert (clock.now(), clock.monotonic()) == (DEFAULT_EPOCH + 2.5, 2.5)
    assert SimClock(env, epoch=100.0).now() == 102.5


def test_sleep_lets_exactly_that_much_virtual_time_pass():
    env = simpy.Environment()
    clock, trace = SimClock(env), []

    def proc():
        trace.append((env.now, "start"))
        yield from clock.sleep(1.5)
        trace.append((env.now, "slept 1.5"))
        yield from clock.sleep(0)
        trace.append((env.now, "slept 0"))

    env.process(proc())
    env.run()
    assert trace == [(0, "start"), (1.5, "slept 1.5"), (1.5, "slept 0")]


def test_wait_until_polls_on_period_and_returns_when_pred_holds():
    env = simpy.Environment()
    clock, checks, flag, out = SimClock(env), [], [], []

    def pred():
        checks.append(env.now)
        return bool(flag)

    def setter():
        yield env.timeout(0.625)
        flag.append(1)

    def waiter():
        out.append((yield from clock.wait_until(pred, timeout=5.0, period=0.25)))
        out.append(env.now)

    env.process(setter())
    env.process(waiter())
    env.run()
    assert checks == [0.0, 0.25, 0.5, 0.75]
    assert out == [True, 0.75]


def test_wait_until_checks_once_more_at_exactly_the_deadline():
    env = simpy.Environment()
    clock, checks, out = SimClock(env), [], []

    def waiter():
        out.append((yield from clock.wait_until(lambda: checks.append(env.now), timeout=1.0, period=0.375)))
        out.append(env.now)

    env.process(waiter())
    env.run()
    assert checks == [0.0, 0.375, 0.75, 1.0]
    assert out == [False, 1.0]


def test_waits_outside_a_process_fail_loudly():
    env = simpy.Environment()
    clock = SimClock(env)
    with pytest.raises(SimClockError, match="yield from clock.sleep"):
        clock.sleep(1.0)
    with pytest.raises(SimClockError, match="yield from clock.wait_until"):
        clock.wait_until(lambda: True, 1.0)


def test_bad_arguments_are_refused_at_the_call():
    env = simpy.Environment()
    clock, errors = SimClock(env), []

    def proc():
        for call in (lambda: clock.sleep(-1), lambda: clock.wait_until(lambda: True, 1.0, period=0)):
            try:
                call()
            except ValueError as e:
                errors.append(str(e))
        yield env.timeout(0)

    env.process(proc())
    env.run()
    assert errors == ["sleep length must be non-negative, got s=-1",
                      "wait_until period must be positive, got period=0"]
