"""Metric bounds (`failover_ms.p99 <= 800`): one parser and one evaluator for scenario
expectations and release gates alike."""
from __future__ import annotations

import math
import re

# a number as float() reads it: 800, 0.95, .5, 1e-3 (never 1.2.3, which float() refuses)
BOUND = re.compile(r"^\s*([a-z_][a-z0-9_.]*)\s*(<=|>=|==|<|>)\s*(-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*$")
OPS = {"<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
       "<": lambda a, b: a < b, ">": lambda a, b: a > b}


def parse(text: str) -> tuple[str, str, float] | None:
    """(metric, operator, number), or None when `text` is not a bound."""
    m = BOUND.match(str(text))
    return (m.group(1), m.group(2), float(m.group(3))) if m else None


def value_at(metrics: dict, path: str):
    """The value at a dotted path (`failover_ms.p99`), or None when absent."""
    cur = metrics
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def holds(value, op: str, number: float) -> bool:
    """An absent or NaN value never satisfies a bound."""
    if value == "inf":            # a failover that never completed (JSON has no infinity)
        value = math.inf
    if value is None or not isinstance(value, (int, float)) or isinstance(value, float) and math.isnan(value):
        return False
    return OPS[op](value, number)
