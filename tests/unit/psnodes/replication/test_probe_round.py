"""detector.probe_round: the probe's bookkeeping both shells share (it was written twice, in
psnodes/replication/election.py and harness/backends/sim/copy/election.py, and tested in neither: review of session 24, M3)."""
from pschaos.psnodes.core.detector import ANSWERED_MISSES, probe_round


def test_after_an_answer_it_takes_two_failed_rounds_in_a_row_to_stand():
    missed, answered_at = (None, 0), None
    missed, held, n = probe_round(missed, answered_at, 5.0, True)       # answered in the silence at 5.0
    assert (missed, held, n) == ((5.0, 0), True, 0)
    answered_at = 5.0
    missed, held, n = probe_round(missed, answered_at, 5.0, False)
    assert (held, n) == (True, 1)                                        # one failed round: still held
    missed, held, n = probe_round(missed, answered_at, 5.0, False)
    assert (held, n) == (False, ANSWERED_MISSES)                         # the second in a row: stand


def test_an_answer_between_misses_starts_the_count_again():
    missed, _, _ = probe_round((5.0, 1), 5.0, 5.0, True)
    assert probe_round(missed, 5.0, 5.0, False)[1:] == (True, 1)


def test_a_silence_never_answered_stands_on_its_first_failed_round():
    assert probe_round((None, 0), None, 7.0, False) == ((7.0, 1), False, 1)
    # the primary answered in an earlier silence (4.0), not in this one (7.0): no hold
    assert probe_round((4.0, 1), 4.0, 7.0, False) == ((7.0, 1), False, 1)


def test_a_late_round_without_an_answer_is_excused_once_per_silence_and_within_the_hold():
    from pschaos.psnodes.core.detector import LOCAL_PAUSE_S, late_round
    late = 0.25 + LOCAL_PAUSE_S + 0.01
    assert late_round(False, 0.25, late, 5.0, None, 0.4, 2.0)
    assert not late_round(False, 0.25, late, 5.0, 5.0, 0.4, 2.0)        # this silence had its one
    assert late_round(False, 0.25, 0.5, 6.0, 5.0, 0.4, 2.0)             # a new silence
    assert not late_round(False, 0.25, 0.26, 5.0, None, 0.4, 2.0)       # in time: a real miss
    assert not late_round(True, 0.25, 0.9, 5.0, None, 0.4, 2.0)         # answered: no excuse needed
    assert not late_round(False, 0.25, late, 5.0, None, 2.0, 2.0)       # silent for the whole hold: stand
