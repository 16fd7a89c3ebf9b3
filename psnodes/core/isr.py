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


DROP_MARGIN_S = 0.001   # a look this far past suspect_s: should_drop is strict, and a timer may wake early


def drop_due(last_ok: float, suspect_s: float, not_before: float) -> float:
    """When a sender whose call is still in flight looks at a silent peer: just past `suspect_s`
    of silence, no sooner than `not_before` (a refused removal's retry, or a probe's hold).
    Without a look during the call, a frozen peer (whose kernel still acks, so the call stays
    open) stayed in the ISR, and sync acks waited, until the call's 2 s deadline: pause-replica's
    longest wait between acknowledged pushes was 2.0 s on both shells."""
    return max(last_ok + suspect_s + DROP_MARGIN_S, not_before)


def probe_wait(probe_s: float, suspect_s: float, call_s: float = 0.0) -> float:
    """How long a look waits for the peer's answer to a probe (a Status call on each of its
    probe paths): at least `suspect_s`, at least `probe_s` (one TCP retransmission on a lossy
    link), and at least twice the peer's last answered call (`call_s`), so a link whose round trip
    alone passes suspect_s (150 ms of latency each way) still answers in time instead of being
    dropped and re-added at every call. The call's silence alone cannot tell slow from frozen:
    dropping on it, a live replica on a 20% lossy link was dropped and re-added 51 times over 10
    seeds of loss-20-primary-replica (0 before)."""
    return max(probe_s, suspect_s, 2 * call_s)


def probe_hold(probe_s: float, heartbeat_s: float) -> float:
    """How long an answer holds a peer before the next look: probe_s, at least a heartbeat (with
    probe_s 0 a look would probe again at once, for as long as the call lasts)."""
    return max(probe_s, heartbeat_s)


def should_readd(peer_caught_up: bool, in_isr: bool) -> bool:
    """A peer that holds exactly our history and is out of the ISR comes back."""
    return peer_caught_up and not in_isr


def add_is_stale(still_primary_of_epoch: bool, in_local_isr: bool) -> bool:
    """A pending etcd add is dropped once we lost that epoch or the peer left our own ISR
    (etcd must never name a member our acks do not wait for)."""
    return not still_primary_of_epoch or not in_local_isr
