"""Hypothesis strategies for fault schedules, for users' own property tests.

`pschaos hunt` draws schedules from a FaultSpace with a seeded generator; these strategies draw
from the same space through Hypothesis, so a user's property test gets Hypothesis's own search
and shrinking (fewer faults, earlier, shorter) over the same targets and the same rule on
concurrent process faults:

    from hypothesis import given, settings
    from pschaos.harness.proof.hunt import FaultSpace
    from pschaos.harness.proof.hunt.strategies import schedules

    @settings(max_examples=20, deadline=None)
    @given(schedules(FaultSpace(shards=2, copies=3, workers=2)))
    def test_no_acked_update_is_lost(schedule):
        report = run_my_cluster(schedule)          # e.g. Runner(hunt_scenario(base, schedule), ...)
        assert report["checks"]["no-lost-acks"]["valid"] is True

Times and durations are drawn on a 10 ms grid, so a shrunk example prints as the schedule it is.
"""
from __future__ import annotations

from hypothesis import strategies as st

from pschaos.harness.proof.hunt.hunt import hunt_scenario
from pschaos.harness.proof.hunt.space import FaultSpace, make_fault
from pschaos.harness.run.scenario import Fault, Scenario


def _grid(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.integers(round(lo * 100), round(hi * 100)).map(lambda c: c / 100)


@st.composite
def faults(draw, space: FaultSpace) -> Fault:
    """One fault of the space: kind, a target from its menu, a start in the window, a duration."""
    kind = draw(st.sampled_from(space.kinds))
    target = draw(st.sampled_from(space.targets(kind)))
    return make_fault(kind, target, draw(_grid(space.start_s, space.stop_s)),
                      draw(_grid(space.min_duration_s, space.max_duration_s)), space.params_for(kind))


def schedules(space: FaultSpace) -> st.SearchStrategy[list[Fault]]:
    """1..space.max_faults faults in time order that the space admits (never every copy down)."""
    return (st.lists(faults(space), min_size=1, max_size=space.max_faults)
            .map(lambda fs: sorted(fs, key=lambda f: f.at.time)).filter(space.admits))


def scenarios(base: Scenario, space: FaultSpace, duration_s: float = 12.0) -> st.SearchStrategy[Scenario]:
    """`base` with a drawn schedule instead of its faults, judged by its safety checks only
    (harness/proof/hunt/hunt.py hunt_scenario)."""
    return schedules(space).map(lambda fs: hunt_scenario(base, fs, duration_s=duration_s))


__all__ = ["faults", "scenarios", "schedules"]
