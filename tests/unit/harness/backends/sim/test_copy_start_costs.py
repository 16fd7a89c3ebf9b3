"""Two timings of a copy's death and start that the twin took as one figure or as a wait (issue
30): each kill's teardown is drawn from the kills calibrate measured (`kill_teardown_samples`), so
a failover's clients begin their retries as spread out as real ones do; and a start's own CPU
(`node_start_cpu_s`) runs on the host's shared cores, so a busy host stretches it as it did a
real replica's restart under training (144-175 ms against 116 measured on an idle host)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.backends.sim.backend import SimBackend
from pschaos.harness.backends.sim.calibration import Calibration
from pschaos.harness.errors import HarnessError

SAMPLES = [0.004, 0.012, 0.03]


def _teardowns(tmp_path: Path, seed: int, cal: Calibration) -> list[float]:
    """Kill and restart shard 0's replica five times: each kill's sockets' close after it."""
    be = SimBackend(ClusterSpec(shards=1, copies=3, workers=0), tmp_path / f"run-{seed}", f"t-{seed}", seed=seed,
                    calibration=cal)
    out = []
    try:
        be.start(timeout=10)
        node = next(n for n in be.copies if n != be.routing()[0].primary)
        for _ in range(5):
            t0 = be.env.now
            be.kill(node)
            out.append(round(be.copies[node].closed_at - t0, 6))
            be.restart(node)
            be.clock.sleep(0.5)
    finally:
        be.teardown()
    return out


def test_each_kill_draws_its_teardown_from_the_measured_kills_reproducibly(tmp_path: Path) -> None:
    cal = replace(Calibration.default(), kill_teardown_s=0.012, kill_teardown_samples=SAMPLES)
    got = _teardowns(tmp_path, 1, cal)
    assert set(got) <= set(SAMPLES) and len(set(got)) > 1, got
    assert _teardowns(tmp_path, 1, cal) == got                  # the seed's draws, again
    assert _teardowns(tmp_path, 2, replace(cal, kill_teardown_samples=[])) == [0.012] * 5   # an older file


def _serving_after(tmp_path: Path, cpu_s: float | None, busy: float) -> float:
    """A replica killed and started again, `busy` cores of other tenants on the host: from its
    restart until serve.py's "start" (its server up, registered in etcd, bootstrapped)."""
    cal = replace(Calibration.default(), node_start_s=0.1, node_start_cpu_s=cpu_s)
    be = SimBackend(ClusterSpec(shards=1, copies=3, workers=0), tmp_path / f"run-{cpu_s}-{busy}", "t-start", seed=4,
                    calibration=cal, background_load=busy)
    try:
        be.start(timeout=10)
        node = next(n for n in be.copies if n != be.routing()[0].primary)
        be.kill(node)
        be.clock.sleep(0.2)
        t0 = be.clock.now()                      # the events' clock
        be.restart(node)
        be.clock.sleep(1.0)
        starts = [e["t"] for e in map(json.loads, be.files.path(node).read_text().splitlines())
                  if e.get("f") == "start"]
        return starts[-1] - t0        # serve.py's "start": its server up, registered, bootstrapped
    finally:
        be.teardown()


def test_a_starts_own_cpu_stretches_on_a_busy_host_and_the_rest_stays_a_wait(tmp_path: Path) -> None:
    plain = _serving_after(tmp_path, None, 3.0)            # an older file: the whole start a plain wait
    idle = _serving_after(tmp_path, 0.08, 0.0)
    busy = _serving_after(tmp_path, 0.08, 3.0)
    assert 0.1 <= idle < 0.12, idle                        # alone on the cores: as measured (and etcd's calls)
    assert 0.1 <= plain < 0.13, plain                      # the wait does not stretch (etcd's calls a little)
    assert busy > plain + 0.05, (plain, busy)              # 3 cores' worth of others on 2: its CPU waits its turns


def test_a_calibration_with_bad_teardown_samples_or_load_rate_is_refused_naming_it(tmp_path: Path) -> None:
    p = tmp_path / "cal.json"
    for key, bad in (("kill_teardown_samples", [0.01, -1]), ("kill_teardown_samples", "fast"),
                     ("kill_teardown_samples", [True]), ("node_start_cpu_s", -0.1),
                     ("node_start_cpu_s", float("nan")), ("node_start_cpu_s", 0.2)):
        p.write_text(json.dumps({key: bad, "node_start_s": 0.1}))
        with pytest.raises(HarnessError, match=key):
            Calibration.load(p)
    p.write_text(json.dumps({"kill_teardown_samples": None}))
    assert Calibration.load(p).kill_teardown_samples in (None, [])         # not measured
    p.write_text(json.dumps({"kill_teardown_samples": SAMPLES, "node_start_cpu_s": 0.08}))
    cal = Calibration.load(p)
    assert cal.kill_teardown_samples == SAMPLES and cal.node_start_cpu_s == 0.08
    assert Calibration(**cal.to_json()).to_json() == cal.to_json()
