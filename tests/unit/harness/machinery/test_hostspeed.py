"""The host's speed probe (harness/machinery/hostspeed.py): samples while it runs, averages a window of its
samples, says why when it has none, and a slowdown is a ratio of two real readings or nothing."""
from __future__ import annotations

import threading
import time

import pytest

import pschaos.harness.machinery.hostspeed as hs
from pschaos.harness.machinery.hostspeed import SpeedProbe, identity, slowdown, unit_ms


def _sampled(n: int, now=time.time) -> SpeedProbe:
    p = SpeedProbe(period_s=0.01, now=now)
    p.start()
    deadline = time.monotonic() + 10
    while len(p.samples) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    p.stop()
    return p


def test_one_probe_reads_a_positive_thread_cpu_time() -> None:
    assert unit_ms() > 0


def test_the_probe_samples_until_stopped_and_stop_is_idempotent() -> None:
    p = _sampled(5)
    got = p.summary()
    assert got["probe_samples"] >= 5 and got["probe_ms"] > 0 and got["probe_ms_p50"] > 0
    n = len(p.samples)
    time.sleep(0.05)
    p.stop()
    assert len(p.samples) == n                          # stopped: no sample after stop
    assert not any(t.name == "pschaos-speed-probe" and t.is_alive() for t in threading.enumerate())


def test_the_summary_averages_only_the_window_and_says_why_when_it_is_empty() -> None:
    ticks = iter(range(1000))
    p = _sampled(6, now=lambda: float(next(ticks)))     # sample k at time k
    ms = dict(p.samples)
    got = p.summary(2.0, 4.0)
    assert got["probe_samples"] == 3 and got["probe_ms"] == pytest.approx((ms[2.0] + ms[3.0] + ms[4.0]) / 3, abs=1e-4)
    none = p.summary(500.0, 600.0)
    assert none["probe_ms"] is None and none["probe_samples"] == 0 and "training window" in none["probe_unknown"]


def test_a_failed_probe_reads_no_speed_and_says_so(monkeypatch) -> None:
    def broken() -> float:
        raise RuntimeError("clock gone")
    monkeypatch.setattr(hs, "unit_ms", broken)
    p = SpeedProbe(period_s=0.01)
    p.start()
    deadline = time.monotonic() + 10
    while p.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    p.stop()
    got = p.summary()
    assert got["probe_ms"] is None and "clock gone" in got["probe_unknown"]


def test_a_slowdown_is_the_ratio_of_two_readings_or_none_without_both() -> None:
    assert slowdown(3.0, 2.0) == 1.5 and slowdown(1.0, 2.0) == 0.5
    assert slowdown(1.0, 3.0) == 0.3333                  # rounded once: validate.json and the run agree
    for run, cal in ((None, 2.0), (2.0, None), (0.0, 2.0), (2.0, 0.0), (-1.0, 2.0), (float("nan"), 2.0),
                     (float("inf"), 2.0), ("2", 2.0), (True, 2.0)):
        assert slowdown(run, cal) is None, (run, cal)


def test_the_identity_names_the_loop_and_the_interpreter() -> None:
    i = identity()
    assert i["unit_loops"] == hs.UNIT_LOOPS and i["period_s"] == hs.PERIOD_S and i["python"].count(".") == 1


def test_a_runs_probe_is_read_over_its_training_window_only() -> None:
    """From the first to the last acknowledged push, on the run's clock (history t + t0): start-up,
    with its imports and forks, and teardown are left out."""
    from pschaos.harness.machinery.hostspeed import over_training

    p = SpeedProbe()
    p.samples = [(100.0, 9.0), (101.0, 1.0), (102.0, 2.0), (103.0, 3.0), (104.0, 9.0)]    # (clock, ms)
    hist = [{"t": 0.5, "f": "promote", "type": "info"}, {"t": 1.0, "f": "push", "type": "ok"},
            {"t": 2.5, "f": "push", "type": "fail"}, {"t": 3.0, "f": "push", "type": "ok"},
            {"t": 3.9, "f": "pull", "type": "ok"}]
    got = over_training(p, hist, t0=100.0)
    assert got["probe_samples"] == 3 and got["probe_ms"] == 2.0 and got["probe_ms_p50"] == 2.0
    none = over_training(p, [e for e in hist if e["f"] != "push"], t0=100.0)
    assert none["probe_ms"] is None and "no acknowledged push" in none["probe_unknown"]
