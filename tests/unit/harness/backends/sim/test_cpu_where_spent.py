"""The CPU real processes spend beyond the calls' burst figures, as the twin charges it: a
worker's per call it makes (calibration client_cpu_extra_s: a real worker's CPU follows its calls,
which a scale-out doubles) and a copy's every second it lives (copy_idle_cpu_s: gRPC's and
serve.py's threads, which twelve copies after a scale-out spend twice of). Measured through the
same functions `pschaos sim calibrate` reads the twin with."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pschaos.harness.run.runner import Runner
from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.run.scenario import load_scenario
from pschaos.harness.backends.sim.backend import SimBackend
from pschaos.harness.proof.twin.calibrate_cpu import twin_idle_rates
from pschaos.harness.proof.twin.run_cpu import charged_between
from pschaos.harness.backends.sim.calibration import Calibration
from pschaos.harness.backends.sim.cpu import io_line
from tests.unit.helpers import only

IDLE = ClusterSpec(shards=1, copies=3, workers=0, replication="sync", optimizer="sgd", checkpoint_interval_s=3600)
BASE = Calibration(cores=2, server_request_s=0.0004, client_request_s=0.0005, worker_step_s={"mlp": 0.002},
                   worker_overhead_s={"mlp": 0.001}, worker_step_jitter={})


def test_a_live_copy_spends_its_idle_cpu_every_second_on_top_of_what_the_model_charges(tmp_path: Path) -> None:
    bare = twin_idle_rates(BASE, IDLE, tmp_path / "bare")
    idle = twin_idle_rates(replace(BASE, copy_idle_cpu_s=0.02), IDLE, tmp_path / "idle")
    assert set(idle) == {"shard-0/0", "shard-0/1", "shard-0/2"}
    for n in idle:       # the charge ticks every 0.2 s: over 4 s, the rate to within a tick's share
        assert idle[n] - bare[n] == pytest.approx(0.02, abs=0.02 * 0.2 / 4 + 1e-9)


def _io(be: SimBackend, name: str, a: float, b: float) -> float:
    """The CPU charged on `name`'s line outside its GIL with virtual times in (a, b]."""
    return sum(w for t, o, w in be.cpu.log if o == io_line(name) and a < t <= b)


def test_a_killed_copy_stops_spending_a_paused_one_too_and_one_restarted_spends_again(tmp_path: Path) -> None:
    be = SimBackend(IDLE, tmp_path / "run", "t-idle", 1, calibration=replace(BASE, copy_idle_cpu_s=0.05))
    be.charge_log = []
    try:
        be.start(timeout=10)
        victim, sleeper = [n for n in be.nodes() if be.routing()[0].primary != n]
        be.kill(victim)
        be.pause(sleeper)
        a = be.env.now
        be.clock.sleep(2.0)
        assert _io(be, victim, a, be.env.now) == 0.0 and _io(be, sleeper, a, be.env.now) == 0.0
        be.restart(victim)
        be.resume(sleeper)
        be.clock.sleep(1.0)
        b = be.env.now
        be.clock.sleep(2.0)
        # one background loop each: 2 s at 50 ms a second, to within the tick in flight at each end
        for n in (victim, sleeper):
            assert _io(be, n, b, be.env.now) == pytest.approx(0.1, abs=0.05 * 0.2 + 1e-9)
    finally:
        be.teardown()


def test_a_calibration_without_the_figure_spends_nothing_idle_beyond_the_model(tmp_path: Path) -> None:
    older = twin_idle_rates(BASE, IDLE, tmp_path / "a")
    assert older == twin_idle_rates(replace(BASE, copy_idle_cpu_s=0.0), IDLE, tmp_path / "z")
    assert all(v > 0 for v in older.values())             # the modelled heartbeats and keepalives
    before_cpu_model = twin_idle_rates(replace(BASE, cores=None, copy_idle_cpu_s=0.05), IDLE, tmp_path / "b")
    assert all(v == 0.0 for v in before_cpu_model.values())


STEPS = """name: calls
cluster: {shards: 2, copies: 1, workers: 1, replication: sync, model: mlp}
workload: {steps: 20}
expect: {checks: [no-lost-acks]}
"""


def _worker_call_charges(cal: Calibration, tmp: Path, model: str = "mlp"
                         ) -> tuple[list[float], list[float], int, int]:
    """worker-0's CPU charges under its GIL other than its steps, those outside it (cpu.py
    io_line), the pushes and pulls its history logged, and the Push and Pull RPCs it made."""
    tmp.mkdir(parents=True, exist_ok=True)
    f = tmp / "calls.yaml"
    f.write_text(STEPS.replace("model: mlp", f"model: {model}"))
    made: list[SimBackend] = []

    def make(s, d, rid, seed) -> SimBackend:
        made.append(SimBackend(s.cluster, d, rid, seed, calibration=cal))
        made[-1].charge_log = []
        return made[-1]
    r = Runner(only(load_scenario(f)), 1, tmp / "run", "sim", quiet=True, make_backend=make)
    assert r.run()["verdict"] == "pass"
    from pschaos.harness.history.events import read_events
    calls = sum(1 for e in read_events(r.out / "history.jsonl")
                if e["node"] == "worker-0" and e["type"] == "invoke" and e["f"] in ("push", "pull"))
    steps = (cal.step_s(model), cal.compute_s(model))     # a step's CPU: all of it, or its compute alone
    log = made[0].cpu.log
    return ([w for _, o, w in log if o == "worker-0" and min(abs(w - x) for x in steps) > 1e-12],
            [w for _, o, w in log if o == io_line("worker-0")], calls, made[0].data_calls["worker-0"])


def test_every_call_a_worker_makes_charges_the_callers_figure_and_its_extra_outside_the_gil(tmp_path: Path) -> None:
    gil, io, calls, rpcs = _worker_call_charges(replace(BASE, client_cpu_extra_s={"mlp": 0.0003}), tmp_path / "x")
    assert calls == 2 * 20 * 2                        # mlp: a pull and a push per shard per step, logged
    assert calls <= rpcs <= calls + 4                 # one RPC each, and a start-up pull or two unlogged
    assert len(io) == rpcs and len(gil) >= rpcs       # (the GIL share is charged on Status calls too)
    assert all(w == pytest.approx(0.0005, abs=1e-12) for w in gil)
    assert all(w == pytest.approx(0.0003, abs=1e-12) for w in io)
    gil, io, _, _ = _worker_call_charges(BASE, tmp_path / "b")
    assert all(w == pytest.approx(0.0005, abs=1e-12) for w in gil) and not io


def test_a_logged_pull_of_an_embedding_model_is_several_rpcs_each_charged(tmp_path: Path) -> None:
    """widedeep's logged pull is one RPC for the dense state and one per table for its rows, per
    shard: the extra goes with each RPC, and calibrate divides the real worker's CPU per logged
    call by the RPCs per logged call (calibrate.py _rpcs_per_invoke)."""
    cal = replace(BASE, worker_step_s={"widedeep": 0.002}, worker_overhead_s={"widedeep": 0.001},
                  client_cpu_extra_s={"widedeep": 0.0003})
    _, io, calls, rpcs = _worker_call_charges(cal, tmp_path / "w", "widedeep")
    assert calls == 2 * 20 * 2 and rpcs > calls        # more RPCs than logged calls
    assert len(io) == rpcs


def _host(cores: int):
    """A bare SimPy host: its cores and a network of free links."""
    import random

    import simpy

    from pschaos.harness.backends.sim.cpu import SimCPU
    from pschaos.harness.backends.sim.network import SimNetwork

    env = simpy.Environment()
    return env, SimCPU(env, cores), SimNetwork(env, random.Random(0), {"fixed_s": 0.0, "per_byte_s": 0.0})


def _answer():
    return "ok"
    yield  # noqa: unreachable - a handler is a generator


def test_a_call_waits_for_its_cpu_outside_the_gil_side_by_side_with_the_gil_share() -> None:
    """The two shares of a caller's CPU run at once: a call costs the longer of them on an idle
    host, and a job already holding the caller's GIL delays only the GIL share."""
    from pschaos.harness.backends.sim.rpc import call

    def took(gil_s: float, io_s: float, busy_gil_s: float = 0.0) -> float:
        env, cpu, net = _host(4)
        out = []

        def proc():
            yield from call(net, "a", "b", lambda: True, _answer, 10, lambda _r: 10, 1.0, cpu, gil_s, io_s)
            out.append(env.now)
        if busy_gil_s:
            cpu.submit(busy_gil_s, "a")
        env.process(proc())
        env.run()
        return out[0]
    assert took(0.002, 0.003) == pytest.approx(0.003, abs=1e-12)
    assert took(0.002, 0.0) == pytest.approx(0.002, abs=1e-12)
    assert took(0.002, 0.003, busy_gil_s=0.004) == pytest.approx(0.006, abs=1e-12)


def test_a_callers_death_takes_both_shares_of_its_call_off_the_cpu() -> None:
    """abort_owner (a SIGKILL) ends the jobs on the process's GIL line and on its line outside
    it: neither keeps a share of the cores, and the call raises at its caller."""
    from pschaos.harness.backends.sim.rpc import call
    from pschaos.harness.backends.sim.transport import Killed

    env, cpu, net = _host(2)
    seen = []

    def caller():
        try:
            yield from call(net, "w", "n", lambda: True, _answer, 10, lambda _r: 10, 1.0, cpu, 0.010, 0.020)
        except Killed:
            seen.append(("killed", env.now))

    def killer():
        yield env.timeout(0.005)
        assert cpu.running() == 2                 # both shares run, side by side
        cpu.abort_owner("w", Killed("w"))
        seen.append(("left", cpu.running()))
    env.process(caller())
    env.process(killer())
    env.run()
    assert seen == [("left", 0), ("killed", 0.005)]
