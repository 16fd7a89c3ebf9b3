"""pschaos.psnodes.core.dedup: a push applies once, its retries get the same seq."""
from pschaos.psnodes.core.dedup import Push, PushDecision, decide, init_is_noop, retry_seq


def test_retry_of_an_applied_key_answers_its_seq():
    assert decide(7, False, [], 12) == PushDecision(Push.DUPLICATE, 7)
    assert decide(7, False, [], 12).duplicate
    assert retry_seq(7, 12) == 7 and retry_seq(0, 12) == 12     # left the recent window: our seq


def test_noop_init_answers_the_seq_that_last_changed_its_tensors():
    assert decide(None, True, [3, 5], 12) == PushDecision(Push.NOOP, 5)
    assert decide(None, True, [], 12) == PushDecision(Push.NOOP, 12)
    assert decide(None, True, [3], 12).duplicate


def test_new_push_applies_as_the_next_seq():
    d = decide(None, False, [], 12)
    assert d == PushDecision(Push.APPLY, 13) and not d.duplicate


def test_init_is_noop_only_when_every_tensor_exists():
    assert init_is_noop(True, ["w", "b"], {"w": 0, "b": 0})
    assert not init_is_noop(True, ["w", "c"], {"w": 0, "b": 0})
    assert not init_is_noop(False, ["w"], {"w": 0})
    assert init_is_noop(True, [], {})
