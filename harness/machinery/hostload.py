"""The host's load around a run: what else ran on the machine while it did.

Why: a real cluster's calls and steps slow down when other tenants use the same cores, and the
twin (harness/backends/sim/cpu.py) can be given that load as background jobs. So every run records, in
report.json's `host_load`:
- `cores`: the host's CPU count;
- `loadavg_start`, `loadavg_end`: os.getloadavg() (1, 5, 15 min) before the cluster starts and
  after it is torn down (the 1-minute figure at the end still counts the run's own processes,
  and at the start the tail of a run just before);
- `busy_cores`: the host's non-idle CPU seconds over the run per second of wall time (every
  process, from /proc/stat via psutil);
- `own_cores`: this process's CPU seconds and its children's (the nodes, workers, etcd and
  Toxiproxy of a process run, reaped at teardown: the zygote reaps the nodes it forked, so they
  count) per second;
- `own_cpu_s`: those CPU seconds themselves (`pschaos bench sim` sets a real run's against its
  twin's);
- `background_cores`: busy less own, at least 0: the cores the host's other tenants used on
  average meanwhile. On a saturated host it is a lower bound of their runnable jobs (a job that
  wanted a core and got half of one counts as half).
A real run's `host_load` also says how fast the cores ran meanwhile: `probe_ms` and its kin
(harness/machinery/hostspeed.py), which no count of busy cores shows.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    wall: float
    loadavg: tuple[float, float, float]
    busy_s: float
    own_s: float


def sample() -> Sample:
    """Now: the wall clock, the load averages, the host's busy CPU seconds, ours and our children's."""
    import psutil

    t = psutil.cpu_times()
    busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
    own = os.times()
    return Sample(time.time(), tuple(round(x, 2) for x in os.getloadavg()), busy,
                  own.user + own.system + own.children_user + own.children_system)


def summary(start: Sample, end: Sample) -> dict:
    """report.json's `host_load` between two samples (fields: module docstring)."""
    wall = max(end.wall - start.wall, 1e-9)
    busy = max(0.0, end.busy_s - start.busy_s) / wall
    own = max(0.0, end.own_s - start.own_s) / wall
    return {"cores": os.cpu_count(), "loadavg_start": list(start.loadavg), "loadavg_end": list(end.loadavg),
            "busy_cores": round(busy, 3), "own_cores": round(own, 3),
            "own_cpu_s": round(max(0.0, end.own_s - start.own_s), 2),
            "background_cores": round(max(0.0, busy - own), 3)}


__all__ = ["Sample", "sample", "summary"]
