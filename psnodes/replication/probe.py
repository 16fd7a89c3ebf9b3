"""A suspecting replica's direct probe of its primary, before it stands (the real node's shell);
the same paths serve a primary's look at a replica whose Replicate call is still in flight
(`answers`, psnodes/replication/replication.py).

The phi detector suspects from the replication stream alone; a stream can be slow while its
primary is alive and serving (a latency fault on the primary's links to this replica, a jitter
burst longer than the floor). So a replica that suspects asks the primary itself, over its own
link to it, waiting until the silence reaches `suspect_s` (the old fixed timeout; at least
`probe_s`): an answer as primary of the epoch we follow holds the suspicion back for a
heartbeat; a refused connection (killed) lets it stand at once, no answer in time (frozen, cut
off) when the fixed detector would have stood. The rule is pschaos.psnodes.core.detector's (`may_probe`, `probe_clears`); a
probe can only delay a suspicion, so the floor the follower lease assumes is untouched.

The channel to a primary is dialled as soon as the replica follows it (`warm`), not at the first
probe: a probe's wait can be as short as `probe_s` (a replica that itself woke late), and on a
loaded machine a TCP connect plus the HTTP/2 handshake took longer than that, so a live primary
went unanswered and was replaced (kill-primary seed 5 at load 10: a spurious failover at start-up).

The probe goes over `probe_paths` connections at once (separate TCP connections: each channel has
its own subchannel pool) and any answer holds: on a lossy link a probe and its answer each get
one retransmission within `probe_s`, and a replica stands only if every path failed, which a
frozen or cut-off primary makes certain and 20% loss makes rare (an estimate, not a measurement:
two of the four packets a path needs lost, about 12% a path, under 0.2% for three).

The probe asks Status with `probe` set: the primary answers its role and epoch without taking its
node lock (`ShardNode.probe_status`), so a primary busy under that lock is not taken for dead.
"""
from __future__ import annotations

import threading
import time

import grpc

from pschaos.psnodes.wire.channels import auth, channel_options
from pschaos.psnodes.core import detector
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc


class PrimaryProbe:
    """`probe_paths` channels to the primary this replica follows now (or, held by a primary's
    sender, to the replica it replicates to: `answers`). Following a new one closes
    the old one's channels: kept, a killed primary's were re-dialled every 200 ms for as long as
    the node ran (detector review 2, L2). The elector closes the last ones when the node stops."""

    def __init__(self, node) -> None:
        self.node = node
        self.primary = ""                                  # whom `stubs` reach ("" : nobody)
        self.stubs: list[ps_pb2_grpc.ParameterServerStub] = []
        self.channels: list[grpc.Channel] = []
        self.connecting: list[grpc.Future] = []
        self.md = auth(node.cfg.token)

    def warm(self, primary: str) -> None:
        """Connect to `primary` now, in the background, so a later probe is one call on a ready
        connection (a killed primary's connection fails the call at once all the same)."""
        if primary and primary in self.node.links and primary != self.primary:
            self._paths(primary)

    def _paths(self, primary: str) -> list[ps_pb2_grpc.ParameterServerStub]:
        if primary != self.primary:
            self.close()
            cfg = self.node.cfg
            # a local subchannel pool per channel: otherwise gRPC shares one connection among
            # channels to the same address, and one lost packet would stall every path alike
            options = channel_options(cfg.max_message_bytes) + [("grpc.use_local_subchannel_pool", 1)]
            for _ in range(max(1, getattr(cfg, "probe_paths", 1))):
                ch = grpc.insecure_channel(self.node.links[primary], options=options)
                self.channels.append(ch)
                self.connecting.append(grpc.channel_ready_future(ch))   # asks the channel to connect now
                self.stubs.append(ps_pb2_grpc.ParameterServerStub(ch))
            self.primary = primary
        return self.stubs

    def clears(self, primary: str, epoch: int, timeout: float) -> bool:
        """The primary answered on any path within `timeout` as primary of `epoch`."""
        return self._ask(primary, timeout, lambda reply: detector.probe_clears(reply.role, reply.epoch, epoch))

    def answers(self, peer: str, timeout: float) -> bool:
        """The peer answered on any path within `timeout`, whatever its role: alive (a primary's
        look at a replica whose Replicate call is still in flight, pschaos.psnodes.replication.replication)."""
        return self._ask(peer, timeout, lambda _reply: True)

    def _ask(self, target: str, timeout: float, good) -> bool:
        """A probe of `target` on every path at once; True once one answer is `good`."""
        if target not in self.node.links:
            return False
        answered = threading.Event()
        left = threading.Semaphore(0)
        calls = []

        def done(fut: grpc.Future) -> None:
            try:
                if good(fut.result()):
                    answered.set()
            except Exception:  # noqa: BLE001 - any failure of a path is no answer on it
                pass
            finally:
                left.release()

        for stub in self._paths(target):
            fut = stub.Status.future(ps_pb2.StatusRequest(probe=True), timeout=timeout, metadata=self.md)
            calls.append(fut)
            fut.add_done_callback(done)
        end = time.monotonic() + timeout + 1.0   # every path ends by its deadline; this bounds it anyway
        for _ in calls:
            if not left.acquire(timeout=max(0.0, end - time.monotonic())) or answered.is_set():
                break
        for fut in calls:
            fut.cancel()
        return answered.is_set()

    def forget(self) -> None:
        """Close the channels if there are any (this node became primary: the primary it probed
        is gone or deposed, and its channels would be re-dialled for as long as the node runs)."""
        if self.primary:
            self.close()

    def close(self) -> None:
        """Close every channel (they stop re-dialling); a later probe dials again."""
        for f in self.connecting:
            f.cancel()
        for ch in self.channels:
            ch.close()
        self.primary, self.stubs, self.channels, self.connecting = "", [], [], []
