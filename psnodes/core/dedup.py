"""Apply or recognise a push: exactly-once by idempotency key, whatever the retries.

A push is keyed by (worker process, request id). A retry of an applied key gets the seq that
applied it (our current seq once it left the recent window, which is still a seq that holds it);
an INIT whose tensors all exist changes nothing and is not logged, and its answer is the seq that
last changed them. Anything else applies as the next seq.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable


class Push(str, Enum):
    DUPLICATE = "duplicate"    # the key was applied before: answer with its seq
    NOOP = "noop"              # an INIT of tensors that exist: nothing to apply or log
    APPLY = "apply"            # new: apply as the next seq


@dataclass(frozen=True)
class PushDecision:
    kind: Push
    seq: int                   # the seq to answer with (for APPLY: the seq it will get)

    @property
    def duplicate(self) -> bool:
        """What the reply says: nothing new was applied."""
        return self.kind is not Push.APPLY


def retry_seq(recorded: int, current: int) -> int:
    """The seq a retry is answered with: the one recorded for its key, or (0: it left the recent
    window) our current seq."""
    return recorded or current


def init_is_noop(is_init: bool, names: Iterable[str], existing: Iterable[str]) -> bool:
    """An INIT whose tensors all exist already changes nothing."""
    have = set(existing)
    return is_init and all(n in have for n in names)


def decide(dup_seq: int | None, noop: bool, noop_mods: list[int], seq: int) -> PushDecision:
    """Given the seq recorded for the key (None: new), whether the update is a no-op INIT, the
    change seqs of its tensors, and our seq."""
    if dup_seq is not None:
        return PushDecision(Push.DUPLICATE, dup_seq)
    if noop:
        return PushDecision(Push.NOOP, max(noop_mods) if noop_mods else seq)
    return PushDecision(Push.APPLY, seq + 1)
