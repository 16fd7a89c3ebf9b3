"""A probe over `probe_paths` paths at once, as pschaos.psnodes.replication.probe.PrimaryProbe asks: one Status call
(probe set) per path, the first good answer ends it and the paths still in flight are cancelled.

Two callers, as in the real node: a suspecting replica asks its primary before it stands
(election.py: good = an answer as primary of the epoch it follows), and a primary asks a
replica whose Replicate call is still in flight after suspect_s of silence (replication.py:
good = any answer; none drops the replica from the ISR). A path is one call on the caller's link
to the target: the twin's network draws each message's fate on its own (loss, latency), so the
paths fail independently as the real ones' separate connections do. The asking copy is
state.py's CopyState (its link, its processes), the asked one only a Peer: alive or not, and
its Status call.
"""
from __future__ import annotations

from typing import Any, Callable

from pschaos.psnodes.errors import PSError
from pschaos.psnodes.proto import ps_pb2

from pschaos.harness.backends.sim.rpc import DEADLINE_MARGIN_S, Gen, call
from pschaos.harness.backends.sim.transport import REPLY_BYTES
from pschaos.harness.backends.sim.copy.state import CopyState, Peer

PROBE_BYTES = 16          # an empty StatusRequest with its metadata


def probe(c: CopyState, target: str, dst: Peer, deadline: float, good: Callable[[Any], bool]) -> Gen:
    """`answered = yield from probe(...)`: True once a path's answer is `good` by `deadline`."""
    answers: list[bool] = []          # one per path that finished (a spawned process returns no value)
    # a dead target's failure path (gRPC's futures and callback threads: CPU outside the copy's
    # GIL, one line shared on the host's cores), one figure a round split over its paths, drawn at
    # the round's first refusal from the network's own stream for probes (the loss and latency
    # draws of a seed stay as they were, whatever the calibration's samples)
    paths = max(1, c.cfg.probe_paths)
    drawn: list[float] = []

    def share() -> float:
        if not drawn:
            drawn.append(c.net.cal.probe_refused(c.net.probe_rng))
        return drawn[0] / paths if c.cpu is not None else drawn[0]    # a line of CPU, or side-by-side waits

    def path() -> Gen:
        try:
            reply = yield from call(c.net, c.name, target, lambda: dst.alive,
                                    lambda: dst.serve_status(ps_pb2.StatusRequest(probe=True),
                                                             deadline - DEADLINE_MARGIN_S),
                                    PROBE_BYTES, lambda _r: REPLY_BYTES, deadline, c.cpu, closed_at=lambda: dst.closed_at,
                                    refused_s=share)
        except PSError:
            answers.append(False)
            return
        answers.append(good(reply))

    pending = [c.spawn(path()) for _ in range(paths)]
    while pending and not any(answers):
        yield c.env.any_of(pending)
        pending = [p for p in pending if not p.triggered]
    for p in pending:                 # PrimaryProbe._ask cancels the paths still in flight
        if p.is_alive:
            p.interrupt("probe answered")
    return any(answers)
