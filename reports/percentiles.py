"""Failover percentiles that count a failover that never completed, as the run's metrics do.

A failover with no new primary acked counts as +inf, and percentiles are nearest rank (numpy
"higher": no interpolation between a time and infinity, never below a value seen). An aggregate
that dropped those and interpolated would report a p99 better than any run's. The one copy of
the rule lives here, where both read it: the run's metrics (harness/run/metrics.py imports it; the
harness may import reports, not the other way) and the aggregates.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def failover_stats(ms: Sequence[float | None]) -> dict:
    """p50/p99/max of failover times, None (never completed) counted as +inf and read "inf"."""
    done = [float(x) for x in ms if x is not None]
    failed = len(ms) - len(done)
    if not ms:
        return {"p50": None, "p99": None, "max": None, "n": 0, "failed": 0, "failed_counted_as": "inf"}
    a = np.asarray(done + [np.inf] * failed, dtype=float)

    def fmt(x: float) -> float | str:
        return "inf" if np.isinf(x) else round(float(x), 1)

    return {"p50": fmt(np.percentile(a, 50, method="higher")), "p99": fmt(np.percentile(a, 99, method="higher")),
            "max": fmt(a.max()), "n": len(ms), "failed": failed, "failed_counted_as": "inf"}
