"""The fuzzer holds the bulkhead to its promise: a push refused Busy applied nothing.

Before, any push answered UNAVAILABLE was judged "may have been applied" (a replication wait
that ran out may apply late), so a Busy refusal followed by a change of the shard's content was
excused: nothing checked the bulkhead's "nothing was applied" (final review of issue 13, L3)."""
from __future__ import annotations

import pytest

from pschaos.harness.proof.fuzz.runner import may_apply_late
from pschaos.psnodes.wire.bulkhead import Bulkhead
from pschaos.psnodes.errors import Busy


def busy_details() -> str:
    """The details a real refusal carries (the servicer aborts with str(e))."""
    b = Bulkhead("shard-0/0", 1)
    with b.admit("Push"):
        with pytest.raises(Busy) as e:
            with b.admit("Push"):
                pass
    return str(e.value)


def test_a_busy_refusal_is_not_excused_and_a_replication_wait_is():
    busy = ("UNAVAILABLE", busy_details()[:300], 0.01, 0, 0)
    wait = ("UNAVAILABLE", "Push: replication to shard-0/1 did not finish; the push may still apply", 0.5, 0, 0)
    late = ("DEADLINE_EXCEEDED", "Deadline Exceeded", 1.0, 0, 0)
    assert not may_apply_late("Push", [busy])
    assert not may_apply_late("Push", [busy, busy, ("OK", "", 0.01, 10, 0)])
    assert may_apply_late("Push", [busy, wait])
    assert may_apply_late("Push", [late])
    assert not may_apply_late("Pull", [wait])
