"""Axis ticks are round and cover the data; labels carry human units, one unit per axis."""
import math

from hypothesis import given
from hypothesis import strategies as st

from reports import ticks


@given(st.floats(-1e6, 1e6), st.floats(1e-3, 1e9), st.integers(2, 12))   # a span far below lo's float precision is no axis
def test_ticks_are_round_evenly_spaced_and_cover_the_range(lo, span, target):
    hi = lo + span
    ts = ticks.nice_ticks(lo, hi, target)
    step = ts[1] - ts[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 2.5, 5, 10))
    assert ts[0] <= lo + abs(step) * 1e-6 and ts[-1] >= hi - abs(step) * 1e-6
    eps = step * 1e-6 + 8 * math.ulp(abs(lo) + span)                    # what floats can tell apart there
    assert all(math.isclose(b - a, step, rel_tol=1e-6, abs_tol=eps) for a, b in zip(ts, ts[1:]))
    assert len(ts) <= 2 * target + 2


def test_the_axes_the_issue_complained_about():
    assert ticks.nice_ticks(0, 1.0, 5)[-1] == 1.0                        # a pass rate axis ends at 100%, not 1.1
    assert ticks.axis(ticks.nice_ticks(0, 1.0, 4), ticks.percent) == ["0%", "25%", "50%", "75%", "100%"]
    assert ticks.axis(ticks.nice_ticks(1.54, 3.04, 4), ticks.seconds) == ["1.5 s", "2.0 s", "2.5 s", "3.0 s", "3.5 s"]
    assert ticks.axis(ticks.nice_ticks(0, 5500, 3), ticks.millis) == ["0", "2 s", "4 s", "6 s"]
    assert ticks.axis(ticks.nice_ticks(0, 75700, 4), ticks.nbytes) == ["0", "20 kB", "40 kB", "60 kB", "80 kB"]
    assert ticks.axis(ticks.nice_ticks(0, 800, 4), ticks.millis) == ["0", "200 ms", "400 ms", "600 ms", "800 ms"]


def test_labels_never_print_an_exponent():
    for v in (5.5e3, 7.57e4, 1.2e6, 3.3e9, 0.0042, 123456789.0):
        for fmt in (ticks.millis, ticks.nbytes, ticks.count, ticks.seconds):
            assert "e+" not in fmt(v) and "e-" not in fmt(v), (fmt.__name__, v, fmt(v))
    assert ticks.nbytes(2718122) == "2.72 MB" and ticks.count(5500) == "5.5k" and ticks.millis(459.5) == "460 ms"


def test_integer_axes_have_no_fractional_ticks():
    assert ticks.nice_ticks(0, 1, 5, integer=True) == [0, 1]
    assert all(t == int(t) for t in ticks.nice_ticks(0, 3, 8, integer=True))


def test_no_value_is_a_dash_never_none():
    assert ticks.maybe(None) == ticks.DASH == "–"
    assert ticks.maybe("inf") == "∞" and ticks.maybe(0.5, ticks.percent) == "50%" and ticks.maybe("x") == "x"
