"""A simulated copy's ack rule: node.py's _wait_replicated, _wait_followers and _wait_lag in
virtual time, with pschaos.psnodes.core.ack's decisions.

Three callers wait on it: a Push (copy.py), a Migrate step's entry (migrate.py) and the shared
checkpoint's publish check (checkpoint.py). It lives below all three, over state.py's CopyState,
so that none of them reaches into another for it. Each wait polls the copy's condition (`wait_change`)
and gives up with the real node's errors: NotPrimary once primacy or the lease is lost,
ReplicationFailed at the deadline.
"""
from __future__ import annotations

from pschaos.psnodes.core import ack
from pschaos.psnodes.errors import NotPrimary, ReplicationFailed

from pschaos.harness.backends.sim.rpc import Gen
from pschaos.harness.backends.sim.copy.state import CopyState


def replicas(c: CopyState) -> ack.Replicas:
    return ack.Replicas(c.name, c.isr, c.peer_seq, c.cfg.mode, c.cfg.min_isr)


def replicated(c: CopyState, seq: int) -> bool:
    return ack.replicated(replicas(c), seq)


def committed(c: CopyState) -> int | None:
    """ShardNode._committed: sync mode's ISR watermark at a read, None in async mode."""
    return ack.watermark(replicas(c), c.store.seq) if c.cfg.mode == "sync" else None


def wait_replicated(c: CopyState, seq: int, epoch: int, deadline: float) -> Gen:
    """Until every ISR member applied `seq`; raise if primacy or the lease is lost."""
    while True:
        if not c.is_primary(epoch):
            raise NotPrimary(f"{c.name} lost primacy of shard {c.shard} before seq {seq} "
                             "was replicated; retry with the same request id")
        c.check_lease()
        if replicated(c, seq):
            return
        left = deadline - c.now()
        if left <= 0:
            lagging = ack.lagging(replicas(c), seq)
            raise ReplicationFailed(f"seq {seq} not acknowledged by in-sync replicas {lagging} in time "
                                    f"(ISR {c.isr}, min_isr {c.cfg.min_isr}); retry with the same request id")
        yield from c.wait_change(min(left, 0.05))


def followers_fresh(c: CopyState) -> bool:
    return ack.followers_fresh(c.name, c.isr, c.peer_heard, c.now(),
                               c.cfg.suspect_floor_s, c.cfg.follower_margin_s)


def wait_followers(c: CopyState, epoch: int, deadline: float) -> Gen:
    """Async mode: ack only under the follower lease, and the etcd lease."""
    while not followers_fresh(c):
        if not c.is_primary(epoch):
            raise NotPrimary(f"{c.name} lost primacy of shard {c.shard}; retry with the same request id")
        c.check_lease()
        left = deadline - c.now()
        if left <= 0:
            silent = ack.silent(c.name, c.isr, c.peer_heard)
            raise ReplicationFailed(f"in-sync replicas have not answered recently ({silent or c.isr}); "
                                    "retry with the same request id")
        yield from c.wait_change(min(left, 0.02))
    c.check_lease()


def wait_lag(c: CopyState, epoch: int, deadline: float) -> Gen:
    """Async mode: pushes wait while a replica trails more than max_lag entries."""
    while not ack.within_lag(replicas(c), c.store.seq, c.cfg.max_lag):
        if not c.is_primary(epoch):
            raise NotPrimary(f"{c.name} lost primacy of shard {c.shard}")
        c.check_lease()
        left = deadline - c.now()
        if left <= 0:
            raise ReplicationFailed(f"replicas trail more than max_lag={c.cfg.max_lag} entries")
        yield from c.wait_change(min(left, 0.05))


__all__ = ["followers_fresh", "replicas", "replicated", "wait_followers", "wait_lag", "wait_replicated"]
