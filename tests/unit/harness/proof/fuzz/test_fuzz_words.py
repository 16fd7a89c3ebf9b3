"""How the fuzzer judges a refusal's words: "Stream removed" is an unclear refusal, but under
DEADLINE_EXCEEDED it is the caller's deadline running out, which a replay must show again (the
CI run of 2026-12-03 failed on one such Snapshot, once in 1600 requests)."""
from pschaos.harness.proof.fuzz.cases import Case
from pschaos.harness.proof.fuzz.runner import NOISY, FuzzRun


def _judge(code: str, details: str) -> list[tuple]:
    found: list[tuple] = []
    case = Case(method="Snapshot", target="primary", auth="ok", body=b"", label="t")
    FuzzRun._judge_words(None, case, [(code, details, 0, 0, len(details))],
                         lambda kind, detail, noisy=None: found.append(
                             (kind, kind in NOISY if noisy is None else noisy)))   # as FuzzRun's add
    return found


def test_a_deadline_that_ran_out_is_replayed_before_it_counts():
    assert _judge("DEADLINE_EXCEEDED", "Stream removed (Deadline Exceeded)") == [("unclear-refusal", True)]


def test_stream_removed_under_any_other_code_is_an_unclear_refusal_at_once():
    assert _judge("INTERNAL", "Stream removed") == [("unclear-refusal", False)]
    assert _judge("INVALID_ARGUMENT", "update.kind=7 is unknown") == []
