"""The scale level's sync replication pipeline (harness/backends/sim/scale/pipeline.py): workers wait on
each other's Replicate calls as psnodes' sync primary makes them (pulls read only what is
replicated, one Replicate in flight, what piled up goes in the next)."""
from __future__ import annotations

import pytest

from pschaos.harness.backends.sim.calibration import DEFAULT_PATH, Calibration
from pschaos.harness.backends.sim.scale.build import build
from pschaos.harness.backends.sim.scale.engine import ScaleRun
from pschaos.harness.backends.sim.scale.params import mean_step, replication_wait, step_rate, timings
from pschaos.harness.backends.sim.scale.pipeline import CAP, sync_wait_s

MS = 1e-3
# think, jitter, fixed, msg, apply, Replicate fixed and per entry: a 3 ms step's calls
ARGS = (1.6 * MS, 0.17, 0.23 * MS, 0.24 * MS, 0.01 * MS, 0.47 * MS, 0.02 * MS)


def wait(workers: int, touched: int = 1, seed: int = 1, args: tuple = ARGS) -> float:
    return sync_wait_s(workers, touched, *args, seed)


def test_a_lone_worker_waits_for_nobody_and_more_workers_wait_longer():
    assert wait(1) == 0.0
    waits = [wait(w) for w in (2, 4, 8, 16)]
    assert 0 < waits[0] < waits[1] < waits[2] < waits[3]
    # a full sender: a pull waits for the call in flight and the next one, a push for the one in flight
    assert waits[3] < 3 * (ARGS[5] + 16 * ARGS[6])


def test_beyond_the_cap_the_wait_stays_and_a_seed_replays_it():
    assert wait(CAP) == wait(CAP * 4)
    sync_wait_s.cache_clear()
    a = wait(4, seed=3)
    sync_wait_s.cache_clear()
    assert wait(4, seed=3) == a and wait(4, seed=4) != a


def test_without_spread_two_workers_settle_a_replicate_apart():
    """No jitter: both push at one instant and the second entry waits for the first's Replicate;
    from then on the two run a Replicate apart, and each step finds the other's call out for what
    is left of it once its own ack and next request crossed the wire: a Replicate of one entry
    less two small messages."""
    think, _, fixed, msg, apply, rep_fixed, rep_entry = ARGS
    got = wait(2, args=(think, 0.0, fixed, msg, apply, rep_fixed, rep_entry))
    assert got == pytest.approx(rep_fixed + rep_entry - 2 * fixed, abs=1e-9)


def test_a_sparse_step_waits_for_the_slowest_of_its_shards():
    assert wait(4, touched=4) > wait(4, touched=1)


def test_sync_steps_pay_the_wait_and_async_replication_does_not():
    cal = Calibration.load(DEFAULT_PATH)
    sync = timings(build(dict(workers=4, shards=4, failures="none", server_request_s=0.0)), cal)
    asyn = timings(build(dict(workers=4, shards=4, failures="none", server_request_s=0.0, replication="async")), cal)
    assert replication_wait(sync, 4) > 0 and replication_wait(asyn, 4) == 0 and replication_wait(sync, 1) == 0
    # (the queue off leaves the apply and the bytes: microseconds of M/D/1 wait, under a per mille
    # of a step of a few ms)
    assert step_rate(sync, 4) == pytest.approx(4 / (mean_step(sync) + replication_wait(sync, 4)), rel=1e-3)
    assert step_rate(asyn, 4) == pytest.approx(4 / mean_step(asyn), rel=1e-3)
    res = ScaleRun(build(dict(workers=4, shards=4, hours=0.001, failures="none", server_request_s=0.0)), cal).run()
    assert res["steps_per_simulated_s"] < 0.99 * res["ideal_steps_per_s"]


def test_a_workers_call_costs_the_longer_of_its_two_cpu_shares_per_shard_it_touches():
    """calibration client_cpu_extra_s: the per-RPC twin charges it outside the worker's GIL, side
    by side with client_request_s; on the scale level's unshared hosts a call costs the longer."""
    from dataclasses import replace

    base = replace(Calibration.load(DEFAULT_PATH), client_request_s=0.0004, client_cpu_extra_s={})
    spec = build(dict(workers=4, shards=4, failures="none"))
    small = replace(base, client_cpu_extra_s={"mlp": 0.0001})
    large = replace(base, client_cpu_extra_s={"mlp": 0.0009})
    assert timings(spec, small).think_s == pytest.approx(timings(spec, base).think_s, abs=1e-12)
    assert timings(spec, large).think_s - timings(spec, base).think_s == pytest.approx(
        (0.0009 - 0.0004) * 2 * spec.touched, abs=1e-12)
