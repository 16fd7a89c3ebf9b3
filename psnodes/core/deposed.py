"""The deposed-primary watch's decision: may a call still waiting on a primary keep waiting?

A call in flight to the primary its client's route names (`primary` at `epoch`) is given up when
the shard record in etcd names a successor: a frozen primary (SIGSTOP, a hung host) keeps its TCP
connection up and never answers, and only the record says it was replaced. The real client
(psnodes/client/shard_calls.py with psnodes/client/record_watch.py) and the SimPy twin (harness/backends/sim/copy/process.py)
both ask this function, so they agree on what a read of the record means.

The record the watch holds may be older than the call's route (one read is shared by every call
of a client, psnodes/client/record_watch.py): a record at a lower epoch is stale news, never a
successor. Epochs only grow (every promotion and restore bumps them by compare-and-swap; a shard
added again bootstraps above its retired epochs), so "a later epoch, or another primary at the
same epoch" is exactly "the route is out of date".
"""
from __future__ import annotations

from enum import Enum


class Watch(str, Enum):
    WAIT = "wait"          # no news against the route: the call keeps its deadline
    DEPOSED = "deposed"    # the record names a successor: give the call up, retry there
    RETIRED = "retired"    # no record, and the routing record no longer names the shard: re-route


def verdict(primary: str, epoch: int, now_primary: str | None, now_epoch: int | None,
            routed: bool | None = None) -> Watch:
    """What a read of the shard record (`now_primary` at `now_epoch`; None: the record is gone)
    means for a call to `primary` at `epoch`. A missing record re-routes only when the routing
    record was read and no longer names the shard (`routed` False: a scale-in retired it); a
    missing record of a shard still routed (a re-add about to write it) or an unknown routing
    (`routed` None) is no news."""
    if now_primary is None or now_epoch is None:
        return Watch.RETIRED if routed is False else Watch.WAIT
    if now_epoch > epoch or (now_epoch == epoch and now_primary != primary):
        return Watch.DEPOSED
    return Watch.WAIT


__all__ = ["Watch", "verdict"]
