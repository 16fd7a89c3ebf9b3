"""pschaos.psnodes.core.detector: phi accrual over the replication stream's gaps, with exact values.

Times are plain numbers (seconds). The defaults: threshold 8 (z = 5.612001244174789 sigmas),
floor 0.15 s, acceptable pause 0.05 s, min sigma 0.01 s, first estimate 0.05 s (so the window
starts with 0.0375 and 0.0625: mean 0.05, sigma 0.0125).
"""
import math
import random

import pytest

from pschaos.psnodes.core import ack
from pschaos.psnodes.core.detector import (FixedDetector, PhiDetector, PhiParams, Window, make, may_probe, phi,
                                   probe_clears, probe_wait, z_for)

Z8 = 5.612001244174789


def fed(gaps, **kw) -> PhiDetector:
    d = PhiDetector(PhiParams(**kw))
    t = 100.0
    d.heard(t)
    for g in gaps:
        t += g
        d.heard(t)
    return d


def test_phi_is_minus_log10_of_the_normal_tail():
    assert phi(0.05, 0.05, 0.01) == pytest.approx(math.log10(2), abs=1e-15)      # at the mean: half
    assert phi(0.05 + 0.01 * 1.2815515655446004, 0.05, 0.01) == pytest.approx(1.0, abs=1e-12)
    assert phi(0.0, 0.05, 0.01) == pytest.approx(-math.log10(1 - 2.866515718791939e-07), abs=1e-15)
    assert phi(10.0, 0.05, 0.01) == math.inf                        # beyond what a float holds


def test_z_is_found_on_phi_itself():
    assert z_for(8.0) == pytest.approx(Z8, abs=1e-12)
    assert z_for(3.0) == pytest.approx(3.090232306167813, abs=1e-12)
    assert phi(z_for(8.0), 0.0, 1.0) == pytest.approx(8.0, abs=1e-9)


def test_a_fresh_detector_starts_from_the_first_estimate():
    d = PhiDetector(PhiParams())
    assert list(d.window.samples) == pytest.approx([0.0375, 0.0625], abs=1e-15)
    assert d.window.mean() == pytest.approx(0.05, abs=1e-15) and d.window.std() == pytest.approx(0.0125, abs=1e-15)
    assert d.delay() == pytest.approx(0.05 + 0.05 + Z8 * 0.0125, abs=1e-12)     # 0.170150015552
    assert d.silence_s() == d.delay()                                            # above the floor
    assert d.phi(d.delay()) == pytest.approx(8.0, abs=1e-9)


def test_a_steady_fast_stream_suspects_at_the_floor_never_before():
    d = fed([0.01] * 4, window=4)                       # the seeds are pushed out of the window
    assert list(d.window.samples) == pytest.approx([0.01] * 4, abs=1e-12)
    assert d.window.std() < 1e-6 and d.sigma() == 0.01  # the minimum sigma stands in
    assert d.delay() == pytest.approx(0.01 + 0.05 + Z8 * 0.01, abs=1e-12)       # 0.11612, under the floor
    assert d.silence_s() == 0.15
    assert not d.suspects(10.0 + 0.15 - 1e-9, 10.0) and d.suspects(10.0 + 0.15, 10.0)


def test_a_latency_step_is_learned():
    """Review 2, H1: dropping every gap longer than the current delay meant a step from 50 ms to
    200 +/- 40 ms gaps was never learned, and every gap after it was a suspicion (80 of 80). Gaps
    up to the ceiling are learned: after a few, the slow stream is no longer suspected."""
    import random
    rng = random.Random(7)
    d = fed([0.05] * 200, ceiling_s=0.3)
    suspected = 0
    t = d.last
    for _ in range(80):
        gap = rng.uniform(0.16, 0.24)
        suspected += d.suspects(t + gap, t)
        t += gap
        d.heard(t)
    assert d.dropped == 0 and suspected <= 20, suspected


def test_a_jittery_stream_waits_longer():
    d = fed([0.01, 0.09] * 2, window=4)                 # mean 0.05, sigma 0.04
    assert d.window.mean() == pytest.approx(0.05, abs=1e-12)
    assert d.window.std() == pytest.approx(0.04, abs=1e-12)
    assert d.silence_s() == pytest.approx(0.05 + 0.05 + Z8 * 0.04, abs=1e-12)   # 0.32448
    assert not d.suspects(10.3244, 10.0) and d.suspects(10.3245, 10.0)


def test_threshold_and_pause_move_the_delay():
    assert fed([0.05] * 3, window=3, threshold=3.0, pause_s=0.0).delay() == pytest.approx(
        0.05 + 3.090232306167813 * 0.01, abs=1e-12)
    assert fed([0.05] * 3, window=3, pause_s=0.2).delay() == pytest.approx(0.05 + 0.2 + Z8 * 0.01, abs=1e-12)


def test_a_new_stream_starts_no_gap_and_a_clock_step_back_is_ignored():
    d = fed([0.01], window=10)
    d.restart()
    d.heard(500.0)                      # the new primary's first call: no 400 s gap
    assert len(d.window.samples) == 2   # the first estimate's two seeds (restart reseeds)
    d.heard(499.0)                      # earlier than the last arrival: no negative gap
    assert len(d.window.samples) == 2 and d.last == 499.0
    d.heard(499.02)
    assert d.window.samples[-1] == pytest.approx(0.02, abs=1e-12)


def test_a_new_primary_starts_from_the_first_estimate_not_the_old_links():
    """The old primary's slow links taught a wide sigma; the new primary's stream is a new one."""
    d = fed([0.01, 0.12] * 50, window=100)
    assert d.silence_s() > 0.4
    d.restart()
    fresh = PhiDetector(PhiParams(window=100))
    assert list(d.window.samples) == list(fresh.window.samples) == pytest.approx([0.0375, 0.0625], abs=1e-15)
    assert d.silence_s() == fresh.silence_s()


def test_the_longest_gap_is_reported_once():
    d = fed([0.01, 0.5, 0.03], window=10, ceiling_s=0.3)
    assert d.stats()["max_gap_ms"] == 500.0
    assert d.take_max_gap() == pytest.approx(0.5, abs=1e-12) and d.take_max_gap() == 0.0
    s = d.stats()
    assert s["detector"] == "phi" and s["silence_ms"] == round(d.silence_s() * 1000, 1)
    assert s["samples"] == 4 and s["dropped"] == 1      # 0.5 s was past the 0.3 s ceiling: not learned


# the review's table (steady gap, one long gap): the silence needed to suspect after the long gap
# entered the window, as the old detector let it (the long gap then raised it for 200 arrivals)
LONG_GAPS = [(0.01, 2.0, 0.858), (0.05, 2.0, 0.882), (0.05, 3.0, 1.282), (0.05, 0.5, 0.280)]


@pytest.mark.parametrize("steady,long,learned", LONG_GAPS)
def test_a_long_gap_is_not_learned(steady, long, learned):
    """A gap longer than the ceiling was already excused (the probe, a local pause): it stays out
    of the window, and the next silence needed is what it was before."""
    d = fed([steady] * 300, ceiling_s=0.3)
    before = d.silence_s()
    assert before == pytest.approx(0.15 if steady == 0.01 else 0.156, abs=5e-4)
    d.heard(d.last + long)
    assert d.silence_s() == before and d.dropped == 1 and d.max_gap == pytest.approx(long, abs=1e-9)
    # the review's figures, had the gap entered the window (the old rule), and the ceiling over them
    old = fed([steady] * 300)
    old.window.add(long)
    assert old.delay() == pytest.approx(learned, abs=5e-4)
    capped = fed([steady] * 300, ceiling_s=0.25)
    capped.window.add(long)
    assert capped.silence_s() == 0.25


def test_a_two_second_gap_then_a_kill_is_suspected_within_suspect_s():
    """The review's concrete run with the config's detector: a 50 ms stream, one 2 s gap (the
    replica paused, or a flap healed), 100 more arrivals (5 s), then the primary dies. The replica
    suspects by suspect_s, still probes and, with no answer, stands by suspect_s + probe_s at the
    latest (the probe's one retransmission). The old detector waited 0.88 s."""
    from pschaos.psnodes.config import ClusterConfig
    from pschaos.psnodes.core.detector import probe_wait
    cfg = ClusterConfig(cluster_id="unit", etcd="http://127.0.0.1:9", shards=1, copies=2, workers=1)
    d = cfg.failure_detector()
    t = 100.0
    for g in [0.05] * 300 + [2.0] + [0.05] * 100:
        t += g
        d.heard(t)
    killed = t                                      # no arrival after this
    silent = next(k * 0.001 for k in range(2000) if d.suspects(killed + k * 0.001, killed))
    assert cfg.phi_floor_s <= silent <= cfg.suspect_s
    assert may_probe(cfg.detector, cfg.probe_s, silent, cfg.suspect_s, probed=True)
    assert silent + probe_wait(cfg.probe_s, silent, cfg.suspect_s) <= cfg.suspect_s + cfg.probe_s + 1e-9


def test_the_ceiling_is_the_fixed_timeout_and_the_probe_adds_its_least_wait():
    from pschaos.psnodes.core.detector import ceiling, probe_wait
    assert ceiling(0.3, 0.15) == 0.3
    assert ceiling(0.1, 0.15) == 0.15               # never under the floor
    d = PhiDetector(PhiParams(window=40, ceiling_s=0.3))
    for g in [0.01, 0.5] * 20:                      # a model that would wait seconds (as learned before)
        d.window.add(g)
    assert d.delay() > 1.0 and d.silence_s() == 0.3
    assert may_probe("phi", 0.25, d.silence_s(), 0.3, probed=False)   # a probe still runs before standing ...
    assert d.silence_s() + probe_wait(0.25, d.silence_s(), 0.3) == pytest.approx(0.55, abs=1e-12)  # ... by 0.55 s
    assert fed([0.01] * 4, window=4, ceiling_s=0.3).silence_s() == 0.15   # the floor still rules below


def test_the_window_sums_never_drift():
    w = Window(7, 0.05)
    rng = random.Random(3)
    for _ in range(10_000):
        w.add(rng.uniform(0.0, 1.0) * 10 ** rng.randint(-4, 2))
    assert w.total == pytest.approx(math.fsum(w.samples), rel=1e-12)
    assert w.squares == pytest.approx(math.fsum(s * s for s in w.samples), rel=1e-12)


def test_fixed_detector_is_the_old_rule():
    d = FixedDetector(0.3)
    d.heard(1.0)
    assert d.delay() == d.silence_s() == 0.3
    assert not d.suspects(1.2999, 1.0) and d.suspects(1.3, 1.0)
    assert d.stats() == {"detector": "fixed", "silence_ms": 300.0}


def test_the_elector_sleeps_until_the_detector_would_suspect():
    d = FixedDetector(0.3)
    assert d.wait(now=10.0, last_heard=10.0, tick=0.05) == 0.05        # at most a tick
    assert d.wait(now=10.28, last_heard=10.0, tick=0.05) == pytest.approx(0.02, abs=1e-12)
    assert d.wait(now=10.5, last_heard=10.0, tick=0.05) == 0.001        # overdue: look at once


def test_make_names_the_kinds():
    assert isinstance(make("fixed", 0.3, PhiParams()), FixedDetector)
    assert isinstance(make("phi", 0.3, PhiParams()), PhiDetector)
    with pytest.raises(ValueError, match="detector='sometimes' is unknown"):
        make("sometimes", 0.3, PhiParams())


def test_a_probe_holds_a_phi_suspicion_back_only_under_the_ceiling():
    assert may_probe("phi", 0.05, 0.2, 0.3, probed=False) and may_probe("phi", 0.05, 0.2, 0.3, probed=True)
    assert not may_probe("phi", 0.05, 0.3, 0.3, probed=True)     # at the ceiling, asked once: it stands
    assert not may_probe("phi", 0.0, 0.2, 0.3, probed=False)     # probe_s 0: no probe
    assert not may_probe("fixed", 0.05, 0.2, 0.3, probed=False)  # the old rule never probes


def test_a_silence_first_seen_past_the_ceiling_is_probed_once():
    """A loaded replica's late wake-up plus an etcd read carried the silence past suspect_s before
    it looked: it still asks the primary once (kill-primary at load 70: a live primary replaced
    at 300.7 ms of silence, unprobed, while the other replica's probe at 296 ms held)."""
    assert may_probe("phi", 0.05, 0.3007, 0.3, probed=False)
    assert not may_probe("phi", 0.05, 0.3007, 0.3, probed=True)
    assert probe_clears("primary", 4, 4)
    assert not probe_clears("primary", 5, 4) and not probe_clears("replica", 4, 4)


@pytest.mark.parametrize("seed", range(20))
def test_no_history_makes_a_replica_suspect_inside_the_follower_lease(seed):
    """The safety argument of async acks: the primary acks while every peer accepted a call sent
    after now - (floor - margin); the peer heard that call at or after its send time, and its
    detector, whatever gaps it learned, never suspects before last_heard + floor."""
    rng = random.Random(seed)
    params = PhiParams(threshold=rng.uniform(0.5, 12), pause_s=rng.uniform(0, 0.1), min_std_s=1e-4,
                       window=rng.randint(2, 50), first_s=rng.uniform(0.001, 0.1))
    d = PhiDetector(params)
    t = 0.0
    for _ in range(rng.randint(0, 200)):
        t += rng.expovariate(1 / rng.choice([0.001, 0.005, 0.05]))
        d.heard(t)
    sent = t - rng.uniform(0, 0.01)             # the accepted call's send time, on the primary
    heard = t                                   # its arrival: the replica's last_heard
    margin = 0.05
    for k in range(200):
        now = sent + k * 0.001
        if ack.followers_fresh("p", ["p", "r"], {"r": sent}, now, params.floor_s, margin):
            assert not d.suspects(now, heard), (now, d.silence_s())


def test_a_replica_that_stood_still_itself_measures_no_silence():
    from pschaos.psnodes.core.detector import LOCAL_PAUSE_S, paused_locally
    assert LOCAL_PAUSE_S == 0.1
    assert not paused_locally(slept_s=0.15, asked_s=0.05)          # 100 ms late: within the allowance
    assert paused_locally(slept_s=0.1501, asked_s=0.05)
    assert paused_locally(slept_s=0.5, asked_s=0.05, allowance_s=0.4)


def test_a_local_pause_is_credited_once_per_silence():
    """The replica stood still `late` seconds: its silence starts that much later, once; on an
    overloaded host, late on every wake-up, it still suspects a dead primary (moving last_heard
    to now on every late wake-up never let the silence grow)."""
    from pschaos.psnodes.core.detector import after_local_pause
    assert after_local_pause(10.0, now=10.4, late_s=0.15, credited=None) == pytest.approx(10.15, abs=1e-12)
    assert after_local_pause(10.15, now=10.6, late_s=0.15, credited=10.15) is None      # once per silence
    assert after_local_pause(10.5, now=10.9, late_s=0.15, credited=10.15) == pytest.approx(10.65, abs=1e-12)
    assert after_local_pause(10.0, now=10.1, late_s=0.3, credited=None) == 10.1          # never past now
    assert after_local_pause(10.2, now=10.1, late_s=0.3, credited=None) == 10.2          # never back
    d = fed([0.05] * 50)
    last, credited, now = 100.0, None, 100.0
    for _ in range(20):                              # every wake-up 150 ms late, nothing heard
        now += 0.05 + 0.15
        moved = after_local_pause(last, now, 0.15, credited)
        if moved is not None:
            last = credited = moved
    assert d.suspects(now, last)


def test_a_primary_that_answered_is_probed_again_until_the_hold_ends():
    """loss-5-primary-replica seed 1: a stream stalled by TCP retransmissions past suspect_s after
    one answered probe made the replica stand against a live primary. Once the primary answered
    in this silence it is asked again at every look, until probe_hold_s; never without an answer."""
    assert may_probe("phi", 0.25, 0.45, 0.3, probed=True, answered=True, hold_s=2.0)
    assert not may_probe("phi", 0.25, 0.45, 0.3, probed=True, answered=False, hold_s=2.0)   # unanswered: it stood
    assert not may_probe("phi", 0.25, 2.0, 0.3, probed=True, answered=True, hold_s=2.0)     # the hold ends
    assert not may_probe("fixed", 0.25, 0.45, 0.3, probed=True, answered=True, hold_s=2.0)
    assert probe_wait(0.25, 0.45, 0.3) == 0.25      # every probe gets one retransmission's time


def test_a_probe_waits_until_the_silence_reaches_the_ceiling():
    from pschaos.psnodes.core.detector import probe_wait
    assert probe_wait(0.05, silent_s=0.15, ceiling_s=0.3) == pytest.approx(0.15, abs=1e-12)
    assert probe_wait(0.05, silent_s=0.28, ceiling_s=0.3) == 0.05       # never less than probe_s


def test_a_failed_probe_round_after_an_answer_holds_once_more():
    """loss-20-primary-replica on the twin, seed 1: every path of one round failed 1.06 s into a
    silence whose primary had answered three rounds before, and the replica stood against a live
    primary. Now it takes ANSWERED_MISSES failed rounds in a row once the primary answered."""
    from pschaos.psnodes.core.detector import ANSWERED_MISSES, holds_after_miss
    assert ANSWERED_MISSES == 2
    assert holds_after_miss(answered=True, misses=1)
    assert not holds_after_miss(answered=True, misses=2)
    assert not holds_after_miss(answered=False, misses=1)     # never answered: the first miss stands
