"""Calls between simulated processes: one request and one reply over SimNetwork, and the history.

A call is what a gRPC unary call is to the real shells: the request travels the caller's link
to the callee (`SimNetwork.deliver`), the callee's handler runs (a generator: it may wait in
virtual time), and the reply travels back downstream on the same link. A transport failure
raises `SimRpcError` with the gRPC status the caller would see; a dead callee fails the call
(UNAVAILABLE) once its sockets close, a killed one `kill_teardown_s` after its kill (`refused`). Domain errors (pschaos.psnodes.errors) raised by the
handler reach the caller as they are, as the real client maps them back at its boundary.

CPU (harness/backends/sim/cpu.py): a call charges the caller's CPU per call (`client_s`: encoding, the
gRPC stack, decoding) on the host's shared cores before its request leaves; the callee's CPU is
its handler's (SimCopy.serve). An etcd call charges the client's and the server's CPU per
operation (SimEtcd's `client_cpu_s`, `cpu_s`) within the server's service time. A charge names
the process it belongs to (cpu.py: a Python process's jobs take turns under its GIL); etcd's own
CPU names none (a Go server).
"""
from __future__ import annotations

from typing import Any, Callable, Generator

import simpy

from pschaos.psnodes.etcd import EtcdError
from pschaos.psnodes.errors import PSError

from pschaos.harness.backends.sim.clock import SimClock
from pschaos.harness.backends.sim.cpu import SimCPU, io_line, use
from pschaos.harness.backends.sim.network import DEADLINE_EXCEEDED, UNAVAILABLE, SimNetwork

Gen = Generator[simpy.Event, Any, Any]
ETCD = "etcd"
ETCD_MSG_BYTES = 256          # a small etcd request or answer
ETCD_TIMEOUT_S = 1.0
DEADLINE_MARGIN_S = 0.02      # pschaos.psnodes.server.calls.deadline_of: a handler serves until 20 ms before the deadline


class SimRpcError(PSError):
    """The call failed in transport: `status` is UNAVAILABLE or DEADLINE_EXCEEDED."""

    def __init__(self, status: str, why: str) -> None:
        super().__init__(status, why)     # SimPy throws a failed event's exception rebuilt from its args
        self.status, self.why = status, why

    def __str__(self) -> str:
        return f"{self.status}: {self.why}"


class SimHistory:
    """The run's history events, in DESIGN.md's format, with `t` in virtual seconds since start."""

    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self.events: list[dict] = []

    def record(self, f: str, value: dict, type_: str = "info", node: str = "harness",
               op_id: str | None = None) -> dict:
        ev = {"t": self.clock.monotonic(), "node": node, "type": type_, "f": f, "value": value}
        if op_id is not None:
            ev["op_id"] = op_id
        self.events.append(ev)
        return ev


def refused(net: SimNetwork, closed_at: Callable[[], float] | None, deadline: float, why: str,
            cost: float | Callable[[], float] = 0.0, cpu: SimCPU | None = None, owner: str | None = None) -> Gen:
    """A call to a dead callee fails once its process's sockets are closed (`closed_at`, virtual
    time), then after the caller's own failure path: `cost` CPU seconds on `cpu` as `owner`
    (without a CPU model, a wait; a callable is asked once the sockets are closed). A SIGKILLed
    process keeps its sockets open, silent, until the kernel has unmapped its memory (calibration
    `kill_teardown_s`: 7-31 ms for a copy with PyTorch loaded on this 2-core VM, by its phase,
    measured by `pschaos sim calibrate` as a connection's close after a SIGKILL), so a call in flight at the kill, or sent meanwhile, hangs until then (or its
    deadline); a caller's retry schedule starts from there, not from the kill. The failure path
    is a replica's probe's (copy/probe.py, calibration `probe_refused_s`): a client's call has
    charged its own CPU before it left."""
    now = net.env.now
    end = max(closed_at() if closed_at is not None else now, now)
    if end > deadline:
        yield net.env.timeout(max(0.0, deadline - now))
        raise SimRpcError(DEADLINE_EXCEEDED, f"{why}; no answer by the deadline")
    if end > now:            # a dead callee whose sockets are closed already fails in this instant, as before
        yield net.env.timeout(end - now)
    cost = cost() if callable(cost) else cost
    if cost > 0:
        if cpu is not None:
            yield from use(cpu, cost, owner)
        else:
            yield net.env.timeout(min(cost, max(0.0, deadline - net.env.now)))
        if net.env.now >= deadline:
            raise SimRpcError(DEADLINE_EXCEEDED, f"{why}; no answer by the deadline")
    raise SimRpcError(UNAVAILABLE, why)


def call(net: SimNetwork, src: str, dst: str, alive: Callable[[], bool], handler: Callable[[], Gen],
         req_bytes: int, reply_bytes: Callable[[Any], int], deadline: float, cpu: SimCPU | None = None,
         client_s: float = 0.0, client_io_s: float = 0.0, closed_at: Callable[[], float] | None = None,
         refused_s: float | Callable[[], float] = 0.0) -> Gen:
    """`reply = yield from call(...)`: the caller's CPU (`client_s` on `cpu` under its GIL and,
    side by side with it, `client_io_s` outside it), deliver, run `handler()` if the callee
    lives, deliver back. A dead callee fails the call once its sockets close and the caller's
    failure path (`refused_s` of CPU outside its GIL) ran (`refused`)."""
    fail = {"cost": refused_s, "cpu": cpu, "owner": io_line(src) if cpu is not None else None}
    if cpu is not None and client_io_s > 0:
        io = cpu.submit(client_io_s, io_line(src))
        try:
            yield from use(cpu, client_s, src)
            yield io.done
        finally:
            if not io.done.triggered:
                cpu.cancel(io)
    else:
        yield from use(cpu, client_s, src)          # the caller's process (its GIL)
    d = yield net.deliver(src, dst, req_bytes, deadline)
    if not d.ok:
        raise SimRpcError(d.error or UNAVAILABLE, f"{src}->{dst} request: {d.cause}")
    if not alive():
        yield from refused(net, closed_at, deadline, f"{dst} is down: connection refused", **fail)
    try:
        reply = yield from handler()
    except PSError:
        if not alive():        # a process killed mid-call answers nothing, not an error of its own
            died = True
        else:
            raise
    else:
        died = not alive()
    if died:
        yield from refused(net, closed_at, deadline, f"{dst} went down during the call", **fail)
    d = yield net.deliver(dst, src, reply_bytes(reply), deadline, reply=True)
    if not d.ok:
        raise SimRpcError(d.error or UNAVAILABLE, f"{dst}->{src} reply: {d.cause}")
    return reply


def etcd_call(net: SimNetwork, env: simpy.Environment, src: str, fn: Callable[[], Any],
              timeout: float = ETCD_TIMEOUT_S, server: Any = None) -> Gen:
    """`out = yield from etcd_call(...)`: one SimEtcd call over the link src->etcd; a lost
    request or answer raises EtcdError as the real client's timeout does (the call may have
    happened all the same when only the answer was lost). With `server` (the SimEtcd), a paused
    (frozen) server holds the request until it is thawed or the call times out (EtcdError); a
    down one refuses it (SimEtcd raises)."""
    deadline = env.now + timeout
    d = yield net.deliver(src, ETCD, ETCD_MSG_BYTES, deadline)
    if not d.ok:
        raise EtcdError(f"etcd unreachable from {src}: {d.error} ({d.cause})")
    if server is not None and server.frozen:
        yield server.thawed | env.timeout(max(0.0, deadline - env.now))
        if server.frozen:
            raise EtcdError(f"etcd unreachable from {src}: ReadTimeout (the server is paused)")
    if server is not None:
        server.last_path = None
    out = fn()
    if server is not None and server.last_path is not None:
        serving = server.running
        service = server.service_s() + server.wake_s(env.now)
        client_cpu, server_cpu = server.cpu_of()
        yield from use(server.cpu, client_cpu, src)         # the client's encoding and decoding
        yield from use(server.cpu, server_cpu)
        if service > 0:
            yield env.timeout(service)
        if serving and not server.running:
            raise EtcdError(f"etcd unreachable from {src}: connection reset (the server went down while answering; "
                            "the call may have been applied)")
        if server.frozen:
            yield server.thawed | env.timeout(max(0.0, deadline - env.now))
            if server.frozen:
                raise EtcdError(f"etcd unreachable from {src}: ReadTimeout (the server is paused)")
        server.touch(env.now)
    d = yield net.deliver(ETCD, src, ETCD_MSG_BYTES, deadline, reply=True)
    if not d.ok:
        raise EtcdError(f"etcd answer to {src} lost: {d.error} ({d.cause})")
    return out


__all__ = ["ETCD", "SimHistory", "SimRpcError", "call", "etcd_call"]
