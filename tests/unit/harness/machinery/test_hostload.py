"""pschaos.harness.machinery.hostload: what else ran on the host during a run (report.json host_load)."""
from __future__ import annotations

import os

from pschaos.harness.machinery.hostload import Sample, sample, summary


def test_background_is_the_hosts_busy_cpu_less_ours_per_second() -> None:
    a = Sample(100.0, (0.5, 0.4, 0.3), busy_s=1000.0, own_s=10.0)
    b = Sample(110.0, (1.5, 0.6, 0.4), busy_s=1015.0, own_s=20.0)
    s = summary(a, b)
    assert s["busy_cores"] == 1.5 and s["own_cores"] == 1.0 and s["background_cores"] == 0.5
    assert s["own_cpu_s"] == 10.0               # the run's own CPU seconds, as bench sim sets them side by side
    assert s["loadavg_start"] == [0.5, 0.4, 0.3] and s["loadavg_end"] == [1.5, 0.6, 0.4]
    assert s["cores"] == os.cpu_count()
    # our children reaped after the host's counters were read can make ours the larger: never negative
    assert summary(a, Sample(110.0, (0, 0, 0), 1005.0, 30.0))["background_cores"] == 0.0


def test_a_sample_counts_this_process_cpu() -> None:
    a = sample()
    x = 0
    for i in range(2_000_000):
        x += i
    b = sample()
    assert b.own_s > a.own_s and b.busy_s >= a.busy_s and b.wall > a.wall and len(b.loadavg) == 3
