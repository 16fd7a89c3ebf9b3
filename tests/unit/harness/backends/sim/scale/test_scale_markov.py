"""The scale level's data-loss figure against the closed-form Markov model of an N-copy group."""
from __future__ import annotations

import math

import pytest

from pschaos.harness.backends.sim.calibration import DEFAULT_PATH, Calibration
from pschaos.harness.backends.sim.scale.build import build
from pschaos.harness.backends.sim.scale.engine import ScaleRun
from pschaos.harness.backends.sim.scale.markov import binomial_sigma, mttdl, p_loss


def test_one_copy_is_the_exponential():
    assert p_loss(1, 0.1, 5.0, 7.0) == pytest.approx(1 - math.exp(-0.7), rel=1e-9)


def test_two_copies_mean_time_to_loss_is_the_textbook_one():
    lam, mu = 0.01, 0.5
    assert mttdl(2, lam, mu) == pytest.approx((3 * lam + mu) / (2 * lam ** 2), rel=1e-9)


def test_loss_grows_with_time_and_falls_with_copies():
    assert p_loss(3, 0.01, 1.0, 100) < p_loss(3, 0.01, 1.0, 1000) < 1
    assert p_loss(3, 0.01, 1.0, 1000) < p_loss(2, 0.01, 1.0, 1000)


@pytest.mark.parametrize("copies,repair_s", [(2, 3600), (3, 7200)])
def test_simulated_groups_lose_their_data_as_the_chain_says(copies, repair_s):
    """Many shards with flaky hosts: the fraction that lost every in-sync copy at once within the
    run agrees with the closed form within 3 binomial standard errors of the number of groups."""
    shards, hours, mtbf_h = 2000, 24.0, 20.0
    spec = build(dict(workers=1, shards=shards, copies=copies, hours=hours, seed=7, failures="none",
                      server_mtbf=f"exp:{mtbf_h}", server_repair=f"exp:{repair_s}"))
    cal = Calibration.load(DEFAULT_PATH)
    res = ScaleRun(spec, cal).run()
    measured = res["orphaned_shards"] / shards
    expect = p_loss(copies, 1 / (mtbf_h * 3600), 1 / (repair_s + cal.node_start_s), hours * 3600)
    sigma = binomial_sigma(expect, shards)
    assert expect > 5 * sigma / 3, "the setting must make losses common enough to measure"
    assert abs(measured - expect) <= 3 * sigma, (measured, expect, sigma)
