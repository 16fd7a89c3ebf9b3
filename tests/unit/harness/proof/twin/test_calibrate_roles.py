"""calibrate_cpu's per-push role split: a copy's CPU over a run's training window, per push its
shard's primary acknowledged, and the real runs' excess over the twin's."""
from __future__ import annotations

import pytest

from pschaos.harness.errors import HarnessError
from pschaos.harness.proof.twin.calibrate_cpu import copy_idle_extra
from pschaos.harness.proof.twin.run_cpu import (_at, charged_between, copy_cpu_extras, per_call_workers, per_push_roles,
                                                training_window, worker_windows)


def ev(t: float, f: str, type_: str = "info", **value) -> dict:
    return {"t": t, "f": f, "type": type_, "node": "x", "value": value}


HIST = [ev(0.5, "promote"), ev(1.0, "train-step"), ev(1.1, "push", "ok", node="shard-0/1"),
        ev(1.2, "push", "ok", node="shard-0/1"), ev(1.3, "push", "ok", node="shard-0/1", duplicate=True),
        ev(1.4, "push", "ok", node="shard-1/0"), ev(2.0, "train-step"), ev(2.5, "push", "ok", node="shard-1/0")]


def test_the_window_runs_from_the_first_training_step_to_the_last() -> None:
    assert training_window(HIST) == (1.0, 2.0)
    assert training_window([ev(1.0, "train-step")]) is None
    # ended before the last step, which teardown follows closely; nothing left of a short run
    assert training_window(HIST, 0.5) == (1.0, 1.5)
    assert training_window(HIST, 1.0) is None


def test_each_shards_primary_is_the_copy_that_acknowledged_its_pushes_the_rest_its_replicas() -> None:
    cpu = {"shard-0/0": 0.2, "shard-0/1": 1.0, "shard-0/2": 0.4, "shard-1/0": 0.9, "shard-1/1": 0.3, "shard-1/2": 0.1}
    prim, repl = per_push_roles(HIST, cpu, training_window(HIST))
    # shard 0: 2 new pushes in the window (a duplicate is no push applied); shard 1: 1 (2.5 is after)
    assert prim == pytest.approx((1.0 / 2 + 0.9 / 1) / 2)
    assert repl == pytest.approx((0.2 / 2 + 0.4 / 2 + 0.3 + 0.1) / 4)


def test_a_sampled_series_is_read_between_samples_and_charges_within_the_window() -> None:
    xs = [(10.0, 1.0), (10.1, 1.5), (10.2, 1.6)]
    assert _at(xs, 10.05) == pytest.approx(1.25) and _at(xs, 9.0) == 1.0 and _at(xs, 11.0) == 1.6
    log = [(0.5, "a", 1.0), (1.0, "a", 0.25), (1.5, "b", 0.5), (2.5, "a", 9.0), (1.6, "b", -0.125)]
    assert charged_between(log, 1.0, 2.0) == {"a": 0.25, "b": 0.375}


def test_the_extra_is_the_real_runs_median_less_the_twins_and_never_negative() -> None:
    real = [(0.0025, 0.0011, 0.0009), (0.0020, 0.0012, 0.0008), (0.0030, 0.0010, 0.0007)]
    assert copy_cpu_extras(real, (0.0013, 0.0003, 0.0005)) == pytest.approx((0.0012, 0.0008, 0.0003), abs=1e-9)
    assert copy_cpu_extras(real, (0.004, 0.002, 0.001)) == (0.0, 0.0, 0.0)     # the twin already spends more
    assert copy_cpu_extras([], (0.0013, 0.0003, 0.0005)) == (0.0, 0.0, 0.0)
    assert copy_idle_extra({"a": 0.030, "b": 0.020}, {"a": 0.012, "b": 0.008}) == pytest.approx(0.015)
    assert copy_idle_extra({"a": 0.010}, {"a": 0.012}) == 0.0
    with pytest.raises(HarnessError, match="no idle CPU reading"):
        copy_idle_extra({}, {"a": 0.012})


def test_a_missing_primary_or_replica_reading_is_refused_and_other_processes_are_ignored() -> None:
    cpu = {"shard-0/0": 0.2, "shard-0/1": 1.0, "shard-0/2": 0.4, "shard-1/0": 0.9, "shard-1/1": 0.3,
           "shard-1/2": 0.1, "worker-0": 5.0, "": 1.0}
    assert per_push_roles(HIST, cpu, (1.0, 2.0), copies=3)[1] == pytest.approx((0.2 / 2 + 0.4 / 2 + 0.3 + 0.1) / 4)
    with pytest.raises(HarnessError, match="no CPU reading of shard-1/0"):
        per_push_roles(HIST, {k: v for k, v in cpu.items() if k != "shard-1/0"}, (1.0, 2.0), copies=3)
    with pytest.raises(HarnessError, match="1 replicas of shard-1/0 read, not 2"):
        per_push_roles(HIST, {k: v for k, v in cpu.items() if k != "shard-1/2"}, (1.0, 2.0), copies=3)


def wev(t: float, node: str, f: str, type_: str = "info") -> dict:
    return {"t": t, "f": f, "type": type_, "node": node, "value": {}}


WORKERS = ([wev(1.0 + 0.1 * i, "worker-0", "train-step") for i in range(31)]       # 1.0 .. 4.0
           + [wev(1.05 + 0.2 * i, "worker-0", "push", "invoke") for i in range(20)]   # 1.05 .. 4.85
           + [wev(1.06 + 0.2 * i, "worker-0", "pull", "invoke") for i in range(20)]
           + [wev(2.0 + 0.1 * i, "worker-1", "train-step") for i in range(21)]        # 2.0 .. 4.0
           + [wev(2.05, "worker-1", "push", "invoke"), wev(2.06, "worker-1", "pull", "ok"),
              wev(2.07, "worker-1", "status", "invoke")])


def test_a_workers_window_is_its_own_steps_less_a_tail_and_its_cpu_goes_per_push_or_pull() -> None:
    w = worker_windows(WORKERS, ["worker-0", "worker-1"])
    assert w["worker-0"] == pytest.approx((1.0, 3.5)) and w["worker-1"] == pytest.approx((2.0, 3.5))
    # worker-0: 13 pushes (1.05..3.45) and 13 pulls in its window; worker-1: one invoke of a push
    per = per_call_workers(WORKERS, {"worker-0": 0.26, "worker-1": 0.004}, w)
    assert per == pytest.approx((0.26 / 26 + 0.004 / 1) / 2)
    with pytest.raises(HarnessError, match="no CPU reading of worker-1, which made 1 calls"):
        per_call_workers(WORKERS, {"worker-0": 0.26}, w)


def test_a_worker_that_trained_too_briefly_is_refused() -> None:
    with pytest.raises(HarnessError, match="worker-2 trained for less than 1.5 s"):
        worker_windows(WORKERS + [wev(1.0, "worker-2", "train-step"), wev(2.2, "worker-2", "train-step")],
                       ["worker-0", "worker-2"])


def test_the_share_of_the_extras_that_matches_the_real_step() -> None:
    from pschaos.harness.proof.twin.overheads import fit_share

    assert fit_share(real=0.030, without=0.020, full=0.029) == 1.0          # the full twin is not slower
    assert fit_share(real=0.030, without=0.020, full=0.040) == pytest.approx(0.5)
    assert fit_share(real=0.030, without=0.031, full=0.040) == 0.0          # slower even without them
