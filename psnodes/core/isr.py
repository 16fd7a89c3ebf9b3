"""In-sync replica set (ISR) changes: when a peer is dropped, when it comes back, what etcd holds.

Invariant: every ISR member in etcd is in the primary's own ISR, so acks wait for it. A removal
lands in etcd before it counts locally (sync mode refuses one that would leave fewer than
`min_isr` copies: then the primary stops acking instead); an add lands in the primary's memory
first, once the peer holds exactly its history, and in etcd after.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class IsrChange:
    """The ISR etcd should hold after a change, or why the change is refused."""

    isr: list[str]
    refused: bool = False

    def unchanged(self, current: Sequence[str]) -> bool:
        return not self.refused and self.isr == list(current)


def change(current: Sequence[str], add: str | None = None, remove: str | None = None,
           mode: str = "sync", min_isr: int = 1) -> IsrChange:
    """Apply an add and/or a removal to the ISR stored in etcd."""
    isr = [p for p in current if p != remove]
    if add and add not in isr:
        isr.append(add)
    if remove and mode == "sync" and len(isr) < min_isr:
        return IsrChange(list(current), refused=True)
    return IsrChange(isr)


def should_drop(now: float, last_ok: float, suspect_s: float, in_isr: bool, not_before: float) -> bool:
    """A peer that answered nothing for `suspect_s` leaves the ISR (retried no sooner than
    `not_before` after a refused or failed attempt)."""
    return now - last_ok > suspect_s and in_isr and now >= not_before


def should_readd(peer_caught_up: bool, in_isr: bool) -> bool:
    """A peer that holds exactly our history and is out of the ISR comes back."""
    return peer_caught_up and not in_isr


def add_is_stale(still_primary_of_epoch: bool, in_local_isr: bool) -> bool:
    """A pending etcd add is dropped once we lost that epoch or the peer left our own ISR
    (etcd must never name a member our acks do not wait for)."""
    return not still_primary_of_epoch or not in_local_isr
