"""pschaos.psnodes.core.gating: BSP/SSP clocks."""
from pschaos.psnodes.core.gating import advance, wanted_clock


def test_advance_keeps_the_highest_step_plus_one():
    assert advance({}, "worker-0", 0) == 1
    assert advance({"worker-0": 5}, "worker-0", 2) == 5
    assert advance({"worker-0": 5}, "worker-0", -1) == 5


def test_wanted_clock():
    assert wanted_clock("bsp", 5, 2) == 5
    assert wanted_clock("ssp", 5, 2) == 3 and wanted_clock("ssp", 1, 2) == 0
    assert wanted_clock("async", 5, 2) == -1
