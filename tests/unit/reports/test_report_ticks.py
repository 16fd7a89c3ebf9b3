"""Axis ticks are round and cover the data; labels carry human units, one unit per axis."""
import math

from hypothesis import given
from hypothesis import strategies as st

from pschaos.reports import ticks


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


def test_time_axes_tick_in_the_unit_they_print():
    """A round number of seconds is not a round number of minutes (500 s / 5 was '1.666667 min')."""
    def labels(end, n=5):
        return ticks.axis(ticks.time_ticks(0, end, n), ticks.seconds)

    assert labels(150) == ["0", "30 s", "60 s", "90 s", "120 s", "150 s"]
    assert labels(600) == ["0", "2 min", "4 min", "6 min", "8 min", "10 min"]
    assert labels(3600) == ["0", "15 min", "30 min", "45 min", "60 min"]
    assert labels(3 * 3600) == ["0", "1 h", "2 h", "3 h"]
    for end in (150, 500, 600, 3600, 10800, 86400 * 3):
        for n in (3, 5, 8, 16):
            out = labels(end, n)
            assert len(set(out)) == len(out) and all(len(s) <= 7 for s in out), out
    # the old ticks, still in seconds, print whole seconds rather than a fraction of a minute
    assert ticks.axis(ticks.nice_ticks(0, 500, 5), ticks.seconds) == ["0", "100 s", "200 s", "300 s", "400 s", "500 s"]
    assert ticks.axis(ticks.ticks_for(ticks.millis, 0, 150_000, 5), ticks.millis)[-1] == "150 s"


def test_rounding_never_crosses_into_a_unit_it_then_does_not_use():
    assert ticks.seconds(0.9999) == "1 s" and ticks.nbytes(999.9) == "1 kB" and ticks.count(999.5) == "1k"
    assert ticks.nbytes(2.5e12) == "2.5 TB"
    flat = ticks.axis(ticks.nice_ticks(2.302585, 2.30258504), ticks.plain)
    assert len(set(flat)) == len(flat)                                   # a flat loss: no five equal labels
    assert ticks.axis(ticks.nice_ticks(0, 1000, 3, integer=True), ticks.count) == ["0", "500", "1000"]
    assert ticks.axis(ticks.nice_ticks(0, 20000, 4, integer=True), ticks.count) == ["0", "5k", "10k", "15k", "20k"]


def test_a_share_is_never_rounded_to_none_or_all():
    assert ticks.percent(0.995) == "99.5%" and ticks.percent(0.9999) == "99.99%"
    assert ticks.percent(0.0004) == "0.04%" and ticks.percent(0.004) == "0.4%"
    assert ticks.percent(1.0) == "100%" and ticks.percent(0.0) == "0%" and ticks.percent(0.75) == "75%"


def test_no_number_prints_as_a_dash_or_infinity():
    nan, inf = float("nan"), float("inf")
    for fmt in (ticks.seconds, ticks.millis, ticks.nbytes, ticks.count, ticks.plain, ticks.percent):
        assert fmt(nan) == ticks.DASH and fmt(inf) == "∞" and fmt(-inf) == "−∞", fmt.__name__
        assert ticks.maybe(nan, fmt) == ticks.DASH and ticks.maybe(inf, fmt) == "∞"


def test_line_charts_leave_out_points_that_are_no_number_and_keep_labels_inside():
    import re

    from pschaos.reports import layout, svg

    page = svg.lines("t", {"a": [(0, 1.0), (1, float("nan")), (2, float("-inf")), (600, 2.0)]},
                     [(float("nan"), 3.0, "kill x"), (10, 20, "kill y")])
    assert "nan" not in page.lower() and "inf" not in page.lower()
    for x, label in re.findall(r'<text x="([\d.]+)" y="[\d.]+" class="tick" text-anchor="middle">([^<]+)</text>', page):
        w = layout.text_width(label, svg.TICK)
        assert float(x) - w / 2 >= 0 and float(x) + w / 2 <= svg.W, (label, x)
    assert ">10 min</text>" in page                                       # the last label is drawn, inside
