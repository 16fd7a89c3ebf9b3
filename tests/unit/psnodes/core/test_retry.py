"""The client's retry pacing (pschaos.psnodes.core.retry): close together while a failover may be under
way, spread out after."""
from pschaos.psnodes.core import retry


def _moments(until_s: float) -> list[float]:
    t, delay, out = 0.0, retry.FIRST_S, []
    while t < until_s:
        t += delay
        out.append(round(t, 4))
        delay = retry.next_delay(delay, t)
    return out


def test_retries_are_never_more_than_the_fast_cap_apart_in_the_failover_window():
    moments = _moments(retry.FAST_WINDOW_S)
    gaps = [b - a for a, b in zip(moments, moments[1:])]
    assert moments[:3] == [0.01, 0.03, 0.055]
    assert max(g for g, m in zip(gaps, moments) if m < retry.FAST_WINDOW_S) <= retry.FAST_CAP_S + 1e-9


def test_a_promotion_is_reached_within_the_fast_cap():
    """The old 50 ms cap left up to 50 ms between a promotion and the retry that finds it."""
    moments = _moments(2.0)
    for promoted in (0.143, 0.151, 0.159, 0.31, 0.44, 0.52):
        nxt = min(m for m in moments if m >= promoted)
        assert nxt - promoted <= retry.FAST_CAP_S + 1e-9, (promoted, nxt)


def test_a_long_outage_spreads_the_retries_out():
    moments = _moments(5.0)
    late = [b - a for a, b in zip(moments, moments[1:]) if a > retry.FAST_WINDOW_S + 0.5]
    assert late and abs(min(late) - retry.SLOW_CAP_S) < 1e-6
    # fewer record reads than the old fixed 50 ms cap over a 5 s outage
    assert len(moments) < 5.0 / 0.05
