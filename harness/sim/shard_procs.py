"""The processes that drive a SimCopy, composed: replication (harness/sim/shard_replication.py)
and lease plus election (harness/sim/shard_election.py), the split of psnodes' replication.py and
election.py. `start` runs what psnodes/serve.py runs for a node: register, keepalive, bootstrap,
then the elector loop; becoming primary starts one sender per peer.
"""
from __future__ import annotations

from .rpc import Gen
from .shard import SimCopy
from .shard_election import SimElector
from .shard_replication import SimReplication


class CopyProcs(SimReplication, SimElector):
    """The replication manager and elector of one copy; `peers` maps names to SimCopy."""

    def __init__(self, copy: SimCopy, peers: dict[str, SimCopy]) -> None:
        self.c, self.peers = copy, peers
        copy.on_promote = self.start_senders

    def start(self) -> None:
        self.c.spawn(self.main())

    def main(self) -> Gen:
        yield from self.register()
        self.c.spawn(self.keepalive())
        yield from self.bootstrap()
        yield from self.elector()


__all__ = ["CopyProcs"]
