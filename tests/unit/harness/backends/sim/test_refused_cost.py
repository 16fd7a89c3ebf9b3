"""A replica's probe of a dead primary takes gRPC's failure path, not the wire's round trip
(issue 30: traced real kill-primary failovers of 2026-12-07 saw the two replicas' probes fail in
2.4-7.9 ms, where the twin said 0.3 ms; detection came 4-5 ms early, and the spread between the
two probes, which moves one candidate's stand past the other's, was missing). `pschaos sim
calibrate` measures the probe on a killed real copy (`probe_refused_s` and its samples in the
calibration's `network`); the twin charges it as the prober's CPU outside its GIL, so it
stretches on a busy host as the real one did."""
from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest
import simpy

from pschaos.harness.backends.sim.cpu import SimCPU
from pschaos.harness.backends.sim.network import NetCalibration, SimNetwork
from pschaos.harness.backends.sim.rpc import SimRpcError, refused

NET = {"fixed_s": 0.001, "per_byte_s": 0.0, "rto_s": 0.2, "rto_max_s": 60.0, "probe_refused_s": 0.0045}


def _dead(closed_at: float = 0.0) -> SimpleNamespace:
    def status(_req, _deadline):
        raise AssertionError("a dead copy serves nothing")
        yield
    return SimpleNamespace(alive=False, closed_at=closed_at, serve_status=status)


def _prober(env: simpy.Environment, net: SimNetwork, cpu: SimCPU | None = None) -> SimpleNamespace:
    return SimpleNamespace(net=net, env=env, name="shard-0/1", cfg=SimpleNamespace(probe_paths=3),
                           spawn=env.process, cpu=cpu)


def _probe_took(env: simpy.Environment, c: SimpleNamespace, dst: SimpleNamespace, out: list) -> None:
    from pschaos.harness.backends.sim.copy.probe import probe

    def asks():
        t0 = env.now
        answered = yield from probe(c, "shard-0/0", dst, env.now + 0.5, lambda _r: True)
        out.append((answered, round(env.now - t0, 6)))
    env.process(asks())


def test_a_probe_of_a_dead_primary_takes_its_wire_then_the_measured_failure_path():
    env = simpy.Environment()
    out: list = []
    _probe_took(env, _prober(env, SimNetwork(env, random.Random(0), NET)), _dead(), out)
    env.run()
    assert out == [(False, 0.0055)]               # the request's 1 ms, then 4.5 ms: not 1 ms
    old = SimNetwork(env, random.Random(0), {k: v for k, v in NET.items() if k != "probe_refused_s"})
    out.clear()
    _probe_took(env, _prober(env, old), _dead(), out)
    env.run()
    assert out == [(False, 0.001)]                # an older calibration: the wire alone, as before
    out.clear()
    _probe_took(env, _prober(env, SimNetwork(env, random.Random(0), NET)), _dead(closed_at=env.now + 0.031), out)
    env.run()
    assert out == [(False, 0.0355)]               # killed just now: its sockets close first


def test_the_probes_failure_path_is_cpu_and_slows_on_a_busy_host():
    env = simpy.Environment()
    cpu = SimCPU(env, cores=1)
    out: list = []
    _probe_took(env, _prober(env, SimNetwork(env, random.Random(0), NET), cpu), _dead(), out)
    env.run()
    assert out == [(False, 0.0055)]               # an idle core: as measured
    cpu.submit(1.0, "worker-0")                   # a worker's training step holds the one core
    out.clear()
    _probe_took(env, _prober(env, SimNetwork(env, random.Random(0), NET), cpu), _dead(), out)
    env.run()
    assert out == [(False, pytest.approx(0.001 + 2 * 0.0045))]   # shared with it: twice as long


def test_a_probe_draws_its_cost_from_the_measured_samples_one_figure_a_round():
    env = simpy.Environment()
    net = SimNetwork(env, random.Random(3), {**NET, "probe_refused_samples": [0.003, 0.007]})
    out: list = []
    for _ in range(20):
        _probe_took(env, _prober(env, net), _dead(), out)
    env.run()
    assert {t for _, t in out} == {0.004, 0.008}  # every path of a round alike; both samples drawn
    def answers(_req, _deadline):
        return SimpleNamespace(role="primary", epoch=1)
        yield
    alive = SimpleNamespace(alive=True, closed_at=0.0, serve_status=answers)
    state = net.rng.getstate()
    out.clear()
    _probe_took(env, _prober(env, net), alive, out)
    env.run()
    assert out == [(True, 0.002)]                 # answered over the wire both ways
    assert net.rng.getstate() == state            # a probe takes nothing from the seed's stream


def test_a_probe_draws_once_a_round_from_its_own_stream_and_the_seed_reproduces_it():
    """One draw a round (not one a path: the max of three draws would show the same figures), on
    a stream of the probes' own, seeded from the run's without drawing from it."""
    import subprocess
    import sys

    env = simpy.Environment()
    net = SimNetwork(env, random.Random(3), {**NET, "probe_refused_samples": [0.003, 0.007]})
    rng_state, probes = net.rng.getstate(), net.probe_rng.getstate()
    out: list = []
    for _ in range(5):
        _probe_took(env, _prober(env, net), _dead(), out)
    env.run()
    assert net.rng.getstate() == rng_state        # loss and latency draws untouched
    replay = random.Random()
    replay.setstate(probes)
    assert sorted(t for _, t in out) == sorted(round(0.001 + replay.choice([0.003, 0.007]), 6) for _ in range(5))
    assert net.probe_rng.getstate() == replay.getstate()     # five rounds, five draws: not one a path
    code = ("import random; from pschaos.harness.backends.sim.network import SimNetwork; "
            "print(SimNetwork(None, random.Random(3), {}).probe_rng.random())")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
            for _ in range(2)}
    assert len(runs) == 1                         # the same seed, the same stream in another process


def test_refused_charges_its_cost_after_the_sockets_close_and_never_past_the_deadline():
    env = simpy.Environment()
    net = SimpleNamespace(env=env)
    out: list = []

    def run(gen):
        def proc():
            t0 = env.now
            try:
                yield from gen
            except SimRpcError as e:
                out.append((round(env.now - t0, 6), e.status))
        env.process(proc())
    run(refused(net, lambda: 0.031, 5.0, "down", cost=0.004))
    run(refused(net, lambda: 0.031, 0.033, "down", cost=0.004))
    run(refused(net, None, 5.0, "down"))
    env.run()
    assert sorted(out) == [(0.0, "UNAVAILABLE"), (0.033, "DEADLINE_EXCEEDED"), (0.035, "UNAVAILABLE")]


def test_the_calibrations_network_carries_the_probe_and_older_files_keep_the_defaults(tmp_path):
    from pschaos.harness.backends.sim.calibration import Calibration
    from pschaos.harness.errors import HarnessError

    cal = NetCalibration.of({"fixed_s": 0.0003, "probe_refused_s": 0.004, "probe_refused_samples": [0.0024, 0.0079]})
    assert cal.probe_refused_s == 0.004 and cal.probe_refused_samples == (0.0024, 0.0079)
    assert NetCalibration.of({"fixed_s": 0.0003}).probe_refused(random.Random(1)) == 0.0
    p = tmp_path / "cal.json"
    for bad, field in (({"fixed_s": "fast"}, "network.fixed_s"), ({"fixed_s": float("nan")}, "network.fixed_s"),
                       ({"probe_refused_samples": [0.003, -1]}, "network.probe_refused_samples"),
                       ({"probe_refused_samples": 0.003}, "network.probe_refused_samples"), ([1], "network"),
                       ({"probe_refused_s": None}, "network.probe_refused_s"),
                       ({"probe_refused_samples": None}, "network.probe_refused_samples")):
        p.write_text(json.dumps({"network": bad}))
        with pytest.raises(HarnessError, match=field.replace(".", r"\.")):
            Calibration.load(p)
    p.write_text(json.dumps({"network": {"fixed_s": 0.0003, "keepalive_s": None, "probe_refused_samples": [0.003]}}))
    assert Calibration.load(p).network["probe_refused_samples"] == [0.003]


def test_the_scale_level_probes_at_the_calibrated_cost_and_retries_pay_the_failed_call():
    from pschaos.harness.backends.sim.calibration import Calibration
    from pschaos.harness.backends.sim.scale.params import ScaleSpec, timings

    base = {"fixed_s": 0.0003, "per_byte_s": 1e-9}
    spec = ScaleSpec(workers=8, shards=2)
    cal = Calibration(network=dict(base), kill_teardown_s=0.03, client_request_s=0.0008)
    before = timings(spec, cal)
    after = timings(spec, Calibration(**{**cal.to_json(), "network": {**base, "probe_refused_s": 0.0045}}))
    assert before.probe_s == pytest.approx(0.0006) and after.probe_s == pytest.approx(0.0003 + 0.0045)
    assert before.teardown_s == 0.03
    # the record read (its wire both ways and etcd's answer), then the call to the dead primary:
    # the worker's CPU for a call and its request's wire
    assert before.retry_s == pytest.approx(3 * 0.0003 + cal.etcd_read_s + max(0.0008, cal.client_cpu_extra("mlp")))
