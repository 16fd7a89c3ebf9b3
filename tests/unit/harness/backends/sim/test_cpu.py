"""The twin's CPU (harness/backends/sim/cpu.py): processor sharing of the host's cores, exact virtual times."""
from __future__ import annotations

import pytest
import simpy

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.sim.cpu import SimCPU


def finish_times(cores: float, jobs: list[tuple], background: float = 0.0) -> list[float]:
    """Each job (start, work[, owner]) as a process; the virtual time each one ends, in the jobs' order."""
    env = simpy.Environment()
    cpu = SimCPU(env, cores, background)
    out: list[float] = [-1.0] * len(jobs)

    def one(i: int, start: float, work: float, owner: str | None = None):
        yield env.timeout(start)
        yield from cpu.use(work, owner)
        out[i] = env.now
    for i, job in enumerate(jobs):
        env.process(one(i, *job))
    env.run()
    assert cpu.running() == 0
    return out


def test_fewer_jobs_than_cores_run_at_full_speed() -> None:
    assert finish_times(2, [(0, 1.0), (0, 0.5)]) == pytest.approx([1.0, 0.5], abs=1e-12)


def test_three_jobs_on_two_cores_share_them() -> None:
    # each at 2/3 of a core: 1 CPU-second takes 1.5 s
    assert finish_times(2, [(0, 1.0)] * 3) == pytest.approx([1.5, 1.5, 1.5], abs=1e-12)


def test_a_job_arriving_late_slows_the_others_from_then_on() -> None:
    # one core: A (2 s) alone until 1 has 1 s left; B (1 s) arrives: both at half speed end at 3
    assert finish_times(1, [(0, 2.0), (1, 1.0)]) == pytest.approx([3.0, 3.0], abs=1e-12)
    # A (1 s) alone until 0.5, then with B (1 s): A's last 0.5 s at half speed ends at 1.5, B then
    # has 0.5 s left alone: 2.0
    assert finish_times(1, [(0, 1.0), (0.5, 1.0)]) == pytest.approx([1.5, 2.0], abs=1e-12)


def test_one_core_serves_unequal_jobs_shortest_first() -> None:
    # 1 s, 2 s, 3 s on one core: all at 1/3 until 3 (the first ends), then 1/2 until the second's
    # last 1 s is done at 5, then the third's last 1 s alone: 6
    assert finish_times(1, [(0, 1.0), (0, 2.0), (0, 3.0)]) == pytest.approx([3.0, 5.0, 6.0], abs=1e-12)


def test_background_load_takes_its_share() -> None:
    assert finish_times(1, [(0, 1.0)], background=1.0) == pytest.approx([2.0], abs=1e-12)
    assert finish_times(2, [(0, 1.0)], background=1.0) == pytest.approx([1.0], abs=1e-12)   # 2 cores, 2 jobs
    assert finish_times(2, [(0, 1.0)], background=3.0) == pytest.approx([2.0], abs=1e-12)   # 2/4 each
    assert finish_times(2, [(0, 1.0)], background=0.5) == pytest.approx([1.0], abs=1e-12)


def test_equal_completions_end_in_start_order() -> None:
    env = simpy.Environment()
    cpu = SimCPU(env, 1)
    order: list[str] = []

    def one(name: str):
        yield from cpu.use(1.0)
        order.append(name)
    for name in ("c", "a", "b"):
        env.process(one(name))
    env.run()
    assert order == ["c", "a", "b"] and env.now == pytest.approx(3.0, abs=1e-12)


def test_a_killed_job_leaves_the_cpu() -> None:
    env = simpy.Environment()
    cpu = SimCPU(env, 1)
    ends: dict[str, float] = {}

    def one(name: str, work: float):
        try:
            yield from cpu.use(work)
            ends[name] = env.now
        except simpy.Interrupt:
            ends[name] = -1.0
    a = env.process(one("a", 10.0))
    env.process(one("b", 1.0))

    def killer():
        yield env.timeout(1.0)      # b has 0.5 s done, then runs alone
        a.interrupt("killed")
    env.process(killer())
    env.run()
    assert ends == pytest.approx({"a": -1.0, "b": 1.5}, abs=1e-12) and cpu.running() == 0


def test_zero_work_takes_no_time_and_bad_settings_are_refused() -> None:
    assert finish_times(1, [(0.25, 0.0)]) == [0.25]
    with pytest.raises(HarnessError, match="cores"):
        SimCPU(simpy.Environment(), 0)
    with pytest.raises(HarnessError, match="background"):
        SimCPU(simpy.Environment(), 2, -1)


def test_one_owners_jobs_run_one_after_another_as_under_a_gil() -> None:
    # two cores, but one process: its two 1 s jobs take turns (first come, first served)
    assert finish_times(2, [(0, 1.0, "p"), (0, 1.0, "p")]) == pytest.approx([1.0, 2.0], abs=1e-12)
    # one core: p's line (1 s, then 1 s) against q's 1 s job: p's first and q's share the core
    # until 2; p's second then runs alone until 3
    assert finish_times(1, [(0, 1.0, "p"), (0, 1.0, "p"), (0, 1.0, "q")]) == \
        pytest.approx([2.0, 3.0, 2.0], abs=1e-12)
    # jobs without an owner (a Go server) do not wait for anyone
    assert finish_times(2, [(0, 1.0, None), (0, 1.0, None)]) == pytest.approx([1.0, 1.0], abs=1e-12)


def test_a_cancelled_head_hands_the_gil_to_the_next_and_a_cancelled_waiter_leaves_the_line() -> None:
    env = simpy.Environment()
    cpu = SimCPU(env, 1)
    ends: dict[str, float] = {}

    def one(name: str, work: float):
        try:
            yield from cpu.use(work, "p")
            ends[name] = env.now
        except simpy.Interrupt:
            ends[name] = -1.0
    a = env.process(one("a", 10.0))
    b = env.process(one("b", 10.0))
    env.process(one("c", 1.0))

    def killer():
        yield env.timeout(0.5)
        b.interrupt("killed")           # waiting in line: leaves it
        yield env.timeout(0.5)
        a.interrupt("killed")           # running: c starts at 1.0
    env.process(killer())
    env.run()
    assert ends == pytest.approx({"a": -1.0, "b": -1.0, "c": 2.0}, abs=1e-12) and cpu.running() == 0


def test_a_killed_owners_jobs_leave_at_once_and_their_waiters_hear_why():
    """abort_owner (review of the CPU model, M1): the dead copy's running and queued jobs stop
    taking a share, the other job speeds up at once, and the owner's next job starts fresh."""
    import simpy

    env = simpy.Environment()
    cpu = SimCPU(env, 1)
    heard, ends = [], {}

    def job(name, work, owner):
        try:
            yield from cpu.use(work, owner)
            ends[name] = env.now
        except RuntimeError as e:
            heard.append((name, str(e), env.now))
    env.process(job("a1", 1.0, "a"))
    env.process(job("a2", 1.0, "a"))          # queued behind a1 (a's GIL)
    env.process(job("b", 1.0, "b"))
    env.run(until=0.5)                        # a1 and b shared the core: 0.25 s each so far
    cpu.abort_owner("a", RuntimeError("a went down"))
    env.process(job("a3", 0.25, "a"))         # a's restart: not behind the dead a1 and a2
    env.run()
    assert heard == [("a1", "a went down", 0.5), ("a2", "a went down", 0.5)]
    assert ends == {"a3": 1.0, "b": 1.5}      # b and a3 share from 0.5 (a3 done at 1.0), then b alone


def test_a_job_ends_late_in_a_long_run_when_its_rest_is_below_the_clocks_resolution() -> None:
    """Past ~8,192 virtual seconds half a float step of `env.now` exceeds the service clock's
    slack (1e-12): a job whose rest is between the two armed a timer that fired at the same
    instant, served nothing and armed it again, for ever (review L1). Stepped with a bound here,
    so the old code fails instead of hanging."""
    env = simpy.Environment()
    env.run(until=20_000.0)
    cpu = SimCPU(env, cores=2)
    job = cpu.submit(1.5e-12)
    for _ in range(1_000):
        if job.done.triggered or not env._queue:
            break
        env.step()
    assert job.done.triggered
    assert env.now == 20_000.0


def test_cpu_is_booked_per_owner_and_a_cancelled_jobs_unserved_rest_is_taken_back() -> None:
    """SimCPU.log is the twin's per-process CPU, which calibration sets against a real run's."""
    from pschaos.harness.proof.twin.run_cpu import charged_between

    env = simpy.Environment()
    cpu = SimCPU(env, 1)
    cpu.log = []
    cpu.submit(0.5, "shard-0/0")
    cpu.submit(0.25, "shard-0/0")
    cpu.submit(0.1)
    late = cpu.submit(1.0, "worker-0")
    env.run(until=0.2)
    cpu.cancel(late)                  # ran 0.2 s at a third of the core: 1 - 0.2/3 never served
    env.run()
    booked = charged_between(cpu.log, 0.0, env.now)
    assert booked == pytest.approx({"shard-0/0": 0.75, "": 0.1, "worker-0": 0.2 / 3})
    assert cpu.busy_s == pytest.approx(sum(booked.values()))


def test_a_slower_host_serves_every_job_that_many_times_slower() -> None:
    """`slowdown` (harness/machinery/hostspeed.py): the host's cores run slower than at calibration, so each
    calibrated CPU second takes `slowdown` seconds, shared as before."""
    def ends(slow: float, jobs: list[tuple], cores: float = 2, background: float = 0.0) -> list[float]:
        env = simpy.Environment()
        cpu = SimCPU(env, cores, background, slow)
        out: list[float] = []

        def one(start: float, work: float):
            yield env.timeout(start)
            yield from cpu.use(work)
            out.append(env.now)
        for j in jobs:
            env.process(one(*j))
        env.run()
        return out
    assert ends(1.25, [(0, 1.0)]) == pytest.approx([1.25], abs=1e-12)
    assert ends(2.0, [(0, 1.0)] * 3) == pytest.approx([3.0] * 3, abs=1e-12)       # 2/3 of a core, half speed
    assert ends(0.5, [(0, 1.0)], cores=1, background=1.0) == pytest.approx([1.0], abs=1e-12)
    assert ends(1.0, [(0, 1.0), (0.5, 1.0)], cores=1) == finish_times(1, [(0, 1.0), (0.5, 1.0)])


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_a_slowdown_that_is_no_speed_is_refused(bad: float) -> None:
    with pytest.raises(HarnessError, match="slowdown="):
        SimCPU(simpy.Environment(), 2, 0.0, bad)
