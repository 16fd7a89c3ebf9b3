"""Totals of per-run counts (lost acknowledged updates, spurious failovers) over many runs.

A run that could not judge a count reports None for it. A total over the runs that could would
read as 0, a pass, while some runs were never judged; so a total is None whenever any run lacks
its figure, and the number of such runs is said alongside it.
"""
from __future__ import annotations

import math
from typing import Iterable


def figure(value) -> int | float | None:
    """A run's count as a number, or None when the run has none (missing, null or non-finite)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


def total(values: Iterable) -> int | float | None:
    """The sum of the runs' counts; None when any run lacks its figure (or there are none)."""
    vals = [figure(v) for v in values]
    return sum(vals) if vals and None not in vals else None


def without(values: Iterable) -> int:
    """How many runs lack their figure."""
    return sum(1 for v in values if figure(v) is None)


def unknown_total(runs_without: int) -> str:
    """What a total prints as when some runs have no figure."""
    return f"unknown: {runs_without} run(s) without a figure"
