"""psnodes.core.gating: BSP/SSP clocks."""
from psnodes.core.gating import advance, min_clock, ready, wanted_clock


def test_min_clock_counts_expected_workers_not_yet_seen_as_zero():
    assert min_clock({"worker-0": 3}, 2) == 0
    assert min_clock({"worker-0": 3, "worker-1": 4}, 2) == 3
    assert min_clock({"worker-7": 2}, 0) == 2 and min_clock({}, 0) == 0


def test_advance_keeps_the_highest_step_plus_one():
    assert advance({}, "worker-0", 0) == 1
    assert advance({"worker-0": 5}, "worker-0", 2) == 5
    assert advance({"worker-0": 5}, "worker-0", -1) == 5


def test_ready_and_wanted_clock():
    assert ready(-1, 0) and ready(3, 3) and not ready(4, 3)
    assert wanted_clock("bsp", 5, 2) == 5
    assert wanted_clock("ssp", 5, 2) == 3 and wanted_clock("ssp", 1, 2) == 0
    assert wanted_clock("async", 5, 2) == -1
