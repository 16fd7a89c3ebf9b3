"""A suspecting replica's direct probe of its primary, before it stands (the real node's shell).

The phi detector suspects from the replication stream alone; a stream can be slow while its
primary is alive and serving (a latency fault on the primary's links to this replica, a jitter
burst longer than the floor). So a replica that suspects asks the primary itself, over its own
link to it, waiting until the silence reaches `suspect_s` (the old fixed timeout; at least
`probe_s`): an answer as primary of the epoch we follow holds the suspicion back for a
heartbeat; a refused connection (killed) lets it stand at once, no answer in time (frozen, cut
off) when the fixed detector would have stood. The rule is psnodes.core.detector's (`may_probe`, `probe_clears`); a
probe can only delay a suspicion, so the floor the follower lease assumes is untouched.

The channel to a primary is dialled as soon as the replica follows it (`warm`), not at the first
probe: a probe's wait can be as short as `probe_s` (a replica that itself woke late), and on a
loaded machine a TCP connect plus the HTTP/2 handshake took longer than that, so a live primary
went unanswered and was replaced (kill-primary seed 5 at load 10: a spurious failover at start-up).

The probe asks Status with `probe` set: the primary answers its role and epoch without taking its
node lock (`ShardNode.probe_status`), so a primary busy under that lock is not taken for dead.
"""
from __future__ import annotations

import grpc

from .channels import auth, dial
from .core import detector
from .proto import ps_pb2, ps_pb2_grpc


class PrimaryProbe:
    """One channel per primary this replica ever probed (a handful: its shard's copies)."""

    def __init__(self, node) -> None:
        self.node = node
        self.stubs: dict[str, ps_pb2_grpc.ParameterServerStub] = {}
        self.channels: list[grpc.Channel] = []
        self.connecting: list[grpc.Future] = []
        self.md = auth(node.cfg.token)

    def warm(self, primary: str) -> None:
        """Connect to `primary` now, in the background, so a later probe is one call on a ready
        connection (a killed primary's connection fails the call at once all the same)."""
        if primary and primary in self.node.links and primary not in self.stubs:
            self._stub(primary)

    def _stub(self, primary: str) -> ps_pb2_grpc.ParameterServerStub:
        if primary not in self.stubs:
            ch = dial(self.node.links[primary], self.node.cfg.max_message_bytes)
            self.channels.append(ch)
            self.connecting.append(grpc.channel_ready_future(ch))   # asks the channel to connect now
            self.stubs[primary] = ps_pb2_grpc.ParameterServerStub(ch)
        return self.stubs[primary]

    def clears(self, primary: str, epoch: int, timeout: float) -> bool:
        """The primary answered within `timeout` as primary of `epoch`."""
        node = self.node
        if primary not in node.links:
            return False
        try:
            reply = self._stub(primary).Status(ps_pb2.StatusRequest(probe=True), timeout=timeout, metadata=self.md)
        except grpc.RpcError:
            return False
        return detector.probe_clears(reply.role, reply.epoch, epoch)

    def close(self) -> None:
        for f in self.connecting:
            f.cancel()
        for ch in self.channels:
            ch.close()
