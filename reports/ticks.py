"""Axis ticks people can read: round steps (1, 2, 5 × 10^k; clock steps for time) and values in human units.

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
    `integer`: no step below 1 (entries, runs and lost acks come whole). A flat series (a span
    below a millionth of its values) gets an axis a percent either side, not five equal labels."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi - lo <= max(abs(lo), abs(hi)) * 1e-6:
        mid = (lo + hi) / 2
        pad = abs(mid) * 0.01 or 1.0
        lo, hi = mid - pad, mid + pad
    step = nice_step(hi - lo, target)
    if integer:
        step = max(1.0, round(step)) if step >= 1 else 1.0
    return _cover(lo, hi, step)


def _cover(lo: float, hi: float, step: float) -> list[float]:
    first = math.floor(lo / step + 1e-9) * step
    last = math.ceil(hi / step - 1e-9) * step
    n = int(round((last - first) / step))
    return [round(first + i * step, 12) for i in range(n + 1)]


# steps a clock reads in: seconds, then minutes, then hours, then whole days
TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def time_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Ticks for a time axis in seconds, round in the unit `seconds` prints them in: below a second
    1/2/5 × 10^k ms; then 1, 2, 5, 10, 15, 30 s; 1, 2, 5, 10, 15, 30 min; 1, 2, 3, 6, 12 h; days.
    (A round number of seconds such as 100 s is 1.666667 min.)"""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(target, 1)
    if raw < 1:
        return nice_ticks(lo, hi, target)
    step = next((s for s in TIME_STEPS if s >= raw * 0.999), None) or 86400 * nice_step(raw / 86400, 1)
    return _cover(lo, hi, step)


def ticks_for(fmt: "Formatter", lo: float, hi: float, target: int = 5) -> list[float]:
    """Round ticks in the unit `fmt` prints: clock steps for durations, whole steps for counts."""
    if fmt is seconds:
        return time_ticks(lo, hi, target)
    if fmt is millis:
        return [round(t * 1000, 9) for t in time_ticks(lo / 1000, hi / 1000, target)]
    return nice_ticks(lo, hi, target, fmt is count)


def _decimals(step: float) -> int:
    """Decimals needed so that neighbouring ticks `step` apart print differently."""
    if step <= 0 or not math.isfinite(step):
        return 0
    d = 0
    while d < 6 and abs(round(step, d) - step) > step * 1e-6:
        d += 1
    return d


def _round_sig(value: float, digits: int = 3) -> float:
    """`value` rounded to `digits` significant digits: a lone value picks its unit after rounding
    (0.9999 s is `1 s`, not `1000 ms`)."""
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


def sig(value: float, digits: int = 3) -> str:
    """`value` to `digits` significant digits, never with an exponent, no trailing zeros
    (1262, 2.72, 5.5, 0.0042)."""
    if value == 0 or not math.isfinite(value):
        return _nonfinite(value) if not math.isfinite(value) else "0"
    d = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    out = f"{value:.{d}f}"
    return out.rstrip("0").rstrip(".") if "." in out else out


def _nonfinite(value: float) -> str:
    """No number: the dash (NaN), or infinity (a failover that never completed)."""
    if math.isnan(value):
        return DASH
    return "∞" if value > 0 else "−∞"


def _scaled(value: float, step: float, ref: float, units: list[tuple[float, str]], trim: bool = False) -> str:
    """`value` in the largest unit that `ref` (the axis' largest tick) reaches, units ordered small
    to large, so that one axis uses one unit; decimals from `step`, or 3 significant digits.
    `trim`: no trailing zeros (a count axis reads `5k, 10k`, not `5.0k, 10.0k`)."""
    if step == 0:
        value = _round_sig(value)
    base, name = units[0]
    for size, unit in units:
        if max(abs(value), abs(step), abs(ref)) >= size:
            base, name = size, unit
    if step == 0:
        return f"{sig(value / base)}{name}"
    out = f"{value / base:.{_decimals(step / base)}f}"
    if trim and "." in out:
        out = out.rstrip("0").rstrip(".")
    return f"{out}{name}"


def _whole(step: float, unit: float) -> bool:
    return abs(step / unit - round(step / unit)) < 1e-9


def seconds(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A duration given in seconds: `450 ms`, `1.5 s`, `2 min`, `3 h` (one unit along an axis: minutes
    or hours only when the step is a whole number of them)."""
    if not math.isfinite(value):
        return _nonfinite(value)
    if value == 0:
        return "0"
    if step == 0:                              # a value on its own: three significant digits
        value = _round_sig(value)
        if abs(value) < 1:
            return f"{sig(value * 1000)} ms"
        if abs(value) >= 7200:
            return f"{sig(value / 3600)} h"
        return f"{sig(value / 60)} min" if abs(value) >= 600 else f"{sig(value)} s"
    ref = max(abs(value), abs(step), abs(ref))
    if ref < 1:
        return f"{value * 1000:.{_decimals(step * 1000)}f} ms"
    if ref >= 7200 and _whole(step, 3600):
        return f"{value / 3600:.0f} h"
    if ref >= 120 and _whole(step, 60):
        return f"{value / 60:.0f} min"
    return f"{value:.{_decimals(step)}f} s"


def millis(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A duration given in milliseconds."""
    return seconds(value / 1000, step / 1000, ref / 1000)


def nbytes(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """Bytes in decimal units: `512 B`, `75 kB`, `1.2 MB`, `3 GB`, `2 TB`."""
    if not math.isfinite(value):
        return _nonfinite(value)
    if value == 0:
        return "0"
    return _scaled(value, step, ref, [(1, " B"), (1e3, " kB"), (1e6, " MB"), (1e9, " GB"), (1e12, " TB")])


def count(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A count: `950`, `5.5k`, `1.2M`; an axis below 10,000 prints whole numbers (`1500`, not `1.5k`)."""
    if not math.isfinite(value):
        return _nonfinite(value)
    if value == 0:
        return "0"
    if step == 0 and abs(value) < 1000 and value == int(value):
        return str(int(value))
    if step and max(abs(value), abs(ref)) < 10_000 and _whole(step, 1):
        return f"{value:.0f}"
    return _scaled(value, step, ref, [(1, ""), (1e3, "k"), (1e6, "M"), (1e9, "G")], trim=True)


def plain(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A unitless number (loss): as many decimals as the step needs, no exponent."""
    if not math.isfinite(value):
        return _nonfinite(value)
    if step == 0:
        return sig(value, 4)
    return f"{value:.{_decimals(step)}f}"


def percent(value: float, step: float = 0.0, ref: float = 0.0) -> str:
    """A share (0..1) as a percentage: `75%`. Never `0%` or `100%` unless exactly so: 99.5% of
    runs passing is not all of them (`99.5%`, `0.04%`)."""
    if not math.isfinite(value):
        return _nonfinite(value)
    d = _decimals(step * 100) if step else 0
    while d < 6 and value not in (0, 1) and round(value * 100, d) in (0, 100):
        d += 1
    return f"{value * 100:.{d}f}%"


def maybe(value, fmt: Formatter = plain) -> str:
    """A table cell: the formatted value, or the dash when there is none."""
    if value is None or value == "":
        return DASH
    if value == "inf":
        return "∞"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return fmt(value) if math.isfinite(value) else _nonfinite(value)
    return str(value)


def axis(ts: list[float], fmt: Formatter) -> list[str]:
    """Labels for one axis' ticks: one unit for all (from the largest), decimals from the step."""
    step = ts[1] - ts[0] if len(ts) > 1 else 0.0
    ref = max((abs(t) for t in ts), default=0.0)
    return [fmt(t, step, ref) for t in ts]
