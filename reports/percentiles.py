"""Failover percentiles that count a failover that never completed, as the run's metrics do.

`harness/metrics.failover_stats` counts a failover with no new primary acked as +inf and takes
nearest-rank percentiles (numpy "higher": no interpolation between a time and infinity, never
below a value seen). An aggregate that dropped those and interpolated would report a p99 better
than any run's. Reports may not import the harness (they read histories and verdicts only), so
the rule is repeated here; a unit test holds both to the same answers.
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
