"""How soon a client tries a shard's primary again after a call failed (pure, shared by the
real client and the SimPy twin's).

A failover completes some 150-300 ms after a kill (the detector's floor plus an election) and
400-550 ms after a freeze or a cut (the probe's wait), and a retry reaches the new primary only
when it comes after the promotion: the wait from the promotion to the next retry is part of
every failover a worker sees. With one 50 ms cap that wait was anything from 0 to 50 ms, so
two runs of one scenario differed by up to 50 ms on where a promotion fell between two retries
(kill-primary: first acks at the new epoch 8-18 ms after the promotion in some seeds, 44-64 ms
in others), and the twin's figure with them. So retries stay close together (`FAST_CAP_S`)
while a failover may still be under way (`FAST_WINDOW_S` from the first failure), and only then
spread out (`SLOW_CAP_S`), so a long outage (etcd down, every copy lost) costs etcd fewer
reads than before: each retry re-reads the shard record.
"""
from __future__ import annotations

FIRST_S = 0.01          # the first retry's pause, doubling ...
FAST_CAP_S = 0.025      # ... up to this while a failover may be under way ...
FAST_WINDOW_S = 1.0     # ... this long after the first failure,
SLOW_CAP_S = 0.1        # then up to this


def next_delay(delay: float, failing_for_s: float) -> float:
    """The pause before the retry after one that waited `delay`, the call having failed for
    `failing_for_s` since its first failure."""
    cap = FAST_CAP_S if failing_for_s < FAST_WINDOW_S else SLOW_CAP_S
    return min(delay * 2, cap)

