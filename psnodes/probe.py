"""A suspecting replica's direct probe of its primary, before it stands (the real node's shell).

The phi detector suspects from the replication stream alone; a stream can be slow while its
primary is alive and serving (a latency fault on the primary's links to this replica, a jitter
burst longer than the floor). So a replica that suspects asks the primary itself, over its own
link to it, waiting until the silence reaches `suspect_s` (the old fixed timeout; at least
`probe_s`): an answer as primary of the epoch we follow holds the suspicion back for a
heartbeat; a refused connection (killed) lets it stand at once, no answer in time (frozen, cut
off) when the fixed detector would have stood. The rule is psnodes.core.detector's (`may_probe`, `probe_clears`); a
probe can only delay a suspicion, so the floor the follower lease assumes is untouched.
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
        self.md = auth(node.cfg.token)

    def clears(self, primary: str, epoch: int, timeout: float) -> bool:
        """The primary answered within `timeout` as primary of `epoch`."""
        node = self.node
        if primary not in node.links:
            return False
        if primary not in self.stubs:
            ch = dial(node.links[primary], node.cfg.max_message_bytes)
            self.channels.append(ch)
            self.stubs[primary] = ps_pb2_grpc.ParameterServerStub(ch)
        try:
            reply = self.stubs[primary].Status(ps_pb2.StatusRequest(), timeout=timeout, metadata=self.md)
        except grpc.RpcError:
            return False
        return detector.probe_clears(reply.role, reply.epoch, epoch)

    def close(self) -> None:
        for ch in self.channels:
            ch.close()
