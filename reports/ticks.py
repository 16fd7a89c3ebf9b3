"""Axis ticks people can read: round steps (1, 2, 5 × 10^k) and values in human units.

An axis that ends at `1.1` for a pass rate or prints `7.57e+04` bytes makes the reader do
arithmetic; every chart in the reports takes its ticks and labels from here instead.
"""
from __future__ import annotations

import math
from collections.abc import Callable

DASH = "–"    # what a table or label shows for "no value", never `None`

Formatter = Callable[..., str]     # (value, tick step=0, axis reference=0) -> label; step 0: a lone value


def nice_step(span: float, target: int = 5) -> float:
    """The round step (1, 2, 2.5 or 5 × 10^k) that cuts `span` into about `target` pieces."""
    if not span > 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw * 0.999:
            return m * mag
    return 10 * mag


def nice_ticks(lo: float, hi: float, target: int = 5, integer: bool = False) -> list[float]:
    """Round ticks covering [lo, hi]: the first at or below lo, the last at or above hi.
    `integer`: no step below 1 (entries, runs and lost acks come whole)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = nice_step(hi - lo, target)
    if integer:
        step = max(1.0, round(step)) if step >= 1 else 1.0
    first = math.floor(lo / step + 1e-9) * step
    last = math.ceil(hi / step - 1e-9) * step
    n = int(round((last - first) / step))
    return [round(first + i * step, 12) for i in range(n + 1)]


def _decimals(step: float) -> int:
    """Decimals needed so that neighbouring ticks `step` apart print differently."""
    if step <= 0 or not math.isfinite(step):
        return 0
    d = 0
    while d < 6 and abs(round(step, d) - step) > step * 1e-6:
        d += 1
    return d


def sig(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant digits, never with an exponent, no trailing zeros
    (1262, 2.72, 5.5, 0.0042)."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    d = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    out = f"{value:.{d}f}"
    return out.rstrip("0").rstrip(".") if "." in out else out


def _scaled(value: float, step: float, ref: float, units: list[tuple[float, str]]) -> str:
    """`value` in the largest unit that `ref` (the axis' largest tick) reaches, units ordered small
    to large, so that one axis uses one unit; decimals from `step`, or 3 significant digits."""
    base, name = units[0]
    for size, unit in units:
        if max(abs(value), abs(step), abs(ref)) >= size:
            base, name = size, unit
    if step == 0:
        return f"{sig(value / base)}{name}"
    return f"{value / base:.{_decimals(step / base)}f}{name}"


def seconds(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A duration given in seconds: `450 ms`, `1.5 s`, `2 min` (one unit along an axis)."""
    if value == 0:
        return "0"
    if step == 0:                              # a value on its own: three significant digits
        if abs(value) < 1:
            return f"{sig(value * 1000)} ms"
        if abs(value) >= 7200:
            return f"{sig(value / 3600)} h"
        return f"{sig(value / 60)} min" if abs(value) >= 600 else f"{sig(value)} s"
    ref = max(abs(value), abs(step), abs(ref))
    if ref < 1:
        return f"{value * 1000:.{_decimals(step * 1000)}f} ms"
    if ref >= 120 and step >= 60:
        return f"{value / 60:.{_decimals(step / 60)}f} min"
    return f"{value:.{_decimals(step)}f} s"


def millis(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A duration given in milliseconds."""
    return seconds(value / 1000, step / 1000, ref / 1000)


def nbytes(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """Bytes in decimal units: `512 B`, `75 kB`, `1.2 MB`, `3 GB`."""
    if value == 0:
        return "0"
    return _scaled(value, step, ref, [(1, " B"), (1e3, " kB"), (1e6, " MB"), (1e9, " GB")])


def count(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A count: `950`, `5.5k`, `1.2M`."""
    if value == 0:
        return "0"
    if step == 0 and abs(value) < 1000 and value == int(value):
        return str(int(value))
    return _scaled(value, step, ref, [(1, ""), (1e3, "k"), (1e6, "M"), (1e9, "G")])


def plain(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A unitless number (loss): as many decimals as the step needs, no exponent."""
    if step == 0:
        return sig(value, 4)
    return f"{value:.{_decimals(step)}f}"


def percent(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A share (0..1) as a percentage: `75%`."""
    return f"{value * 100:.{_decimals(step * 100) if step else 0}f}%"


def maybe(value, fmt: Formatter = plain) -> str:
    """A table cell: the formatted value, or the dash when there is none."""
    if value is None or value == "":
        return DASH
    if value == "inf":
        return "∞"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return fmt(value)
    return str(value)


def axis(ts: list[float], fmt: Formatter) -> list[str]:
    """Labels for one axis' ticks: one unit for all (from the largest), decimals from the step."""
    step = ts[1] - ts[0] if len(ts) > 1 else 0.0
    ref = max((abs(t) for t in ts), default=0.0)
    return [fmt(t, step, ref) for t in ts]
