"""What the real PS client (psnodes/client/client.py) and the migration coordinator (psnodes/elastic/migration.py)
dial, in a simulated run: stubs, etcd, thread pool.

pschaos.psnodes.client.client.PSClient and pschaos.psnodes.elastic.migration.Migrator take a stub factory, an etcd client and a
Runtime; here they carry their calls over SimNetwork to the SimCopy handlers in virtual time
(harness/backends/sim/vtime.py blocks the calling thread meanwhile). A failure reaches the caller as a
grpc.RpcError with the status code the real channel would raise (a domain error with its own:
StaleRouting is ABORTED, as the real servicer maps it), so the callers' retry and error mapping
run unchanged. Each call charges the caller's CPU per call (calibration `client_request_s`) and a
worker's Push and Pull RPCs also `client_cpu_extra_s` (what a real worker's process spends per
RPC under load beyond that idle figure, outside its GIL: cpu.py io_line) on the host's shared
cores (harness/backends/sim/cpu.py), the callee's handler its own.
"""
from __future__ import annotations

from concurrent.futures import Executor
from typing import Any, Callable

import grpc

from pschaos.psnodes.errors import PSError
from pschaos.psnodes.etcd import EtcdError
from pschaos.psnodes.proto import ps_pb2

from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.rpc import SimRpcError, call, etcd_call
from pschaos.harness.backends.sim.vtime import Baton, Closed, VirtualTime

REPLY_BYTES = 48          # a PushReply or StatusReply: small
CLIENT_ETCD_TIMEOUT_S = 0.5     # pschaos.psnodes.client.shard_calls.ShardCalls: Etcd(..., timeout=0.5)


class SimStatusError(grpc.RpcError):
    """A failed simulated call, as grpc raises it: `code()` and `details()`."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class Killed(BaseException):
    """The simulated process making this call was killed: its thread unwinds (BaseException, so
    the worker's own `except PSError` does not swallow it)."""


class SimStub:
    """ParameterServerStub of one node: Push, Pull, Status, Migrate, as generated stubs are called."""

    def __init__(self, world: Any, src: str, dst: str, dead: Callable[[], bool], extra_cpu_s: float = 0.0) -> None:
        self.w, self.src, self.dst, self.dead = world, src, dst, dead
        # the caller's CPU per call: the burst's figure under its GIL, the rest outside it (cpu.py io_line)
        self.cpu_s, self.io_s = world.cal.client_request_s, extra_cpu_s

    def _call(self, handler: Callable[[Any], Any], req: Any, timeout: float | None, reply_bytes,
              data: bool = False) -> Any:
        """One call; `data` (a Push or a Pull) also charges the caller's CPU outside its GIL,
        which calibrate measured per Push and Pull a worker made."""
        if self.dead():
            raise Killed(self.src)
        w = self.w
        if data:
            w.data_calls[self.src] = w.data_calls.get(self.src, 0) + 1
        copy = w.copies[self.dst]
        deadline = w.env.now + (timeout or w.cfg.rpc_timeout_s)
        gen = call(w.net, self.src, self.dst, lambda: copy.alive, lambda: handler(copy, deadline),
                   req.ByteSize(), reply_bytes, deadline, w.cpu, self.cpu_s, self.io_s if data else 0.0,
                   closed_at=lambda: copy.closed_at)
        try:
            out = w.vt.run_process(gen)
        except (SimRpcError, PSError) as e:
            if self.dead():
                raise Killed(self.src) from None
            code = getattr(grpc.StatusCode, e.status) if isinstance(e, SimRpcError) else e.code
            raise SimStatusError(code, str(e)) from None
        except Closed:
            raise                           # the simulation ended: unwind, never as a kill
        if self.dead():
            raise Killed(self.src)
        return out

    def Push(self, req: ps_pb2.PushRequest, timeout: float | None = None, metadata=None) -> ps_pb2.PushReply:
        return self._call(lambda c, dl: c.push(req, dl - 0.02, self.src), req, timeout, lambda _r: REPLY_BYTES, True)

    def Pull(self, req: ps_pb2.PullRequest, timeout: float | None = None, metadata=None) -> ps_pb2.PullReply:
        raw = self._call(lambda c, dl: c.pull(req, dl - 0.02, self.src), req, timeout, len, True)
        return ps_pb2.PullReply.FromString(raw)

    def Status(self, req: ps_pb2.StatusRequest, timeout: float | None = None, metadata=None) -> ps_pb2.StatusReply:
        def handler(c, dl):
            return c.status(req)
            yield  # noqa: unreachable - a generator like every handler
        return self._call(handler, req, timeout, lambda r: r.ByteSize())

    def Migrate(self, req: ps_pb2.MigrateRequest, timeout: float | None = None, metadata=None) -> ps_pb2.MigrateReply:
        return self._call(lambda c, dl: c.migrate(req, dl - 0.02), req, timeout, lambda r: r.ByteSize())


class SimEtcdClient:
    """pschaos.psnodes.etcd.Etcd as a worker and the migration coordinator use it (routing reads, the
    membership's registration, keepalive, compare-and-swap and revoke, `healthy`), each call over
    the link src->etcd with the caller's client timeout (the PS client's 0.5 s by default)."""

    def __init__(self, world: Any, src: str, dead: Callable[[], bool], timeout: float = CLIENT_ETCD_TIMEOUT_S) -> None:
        self.w, self.src, self.dead, self.timeout = world, src, dead, timeout

    def healthy(self) -> bool:
        """Etcd.healthy: a read answered within 0.5 s."""
        try:
            self._call(lambda: self.w.etcd.get("/health-probe"), min(self.timeout, 0.5))
            return True
        except EtcdError:
            return False

    def _call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        if self.dead():
            raise Killed(self.src)
        try:
            out = self.w.vt.run_process(etcd_call(self.w.net, self.w.env, self.src, fn,
                                                  timeout=timeout or self.timeout, server=self.w.etcd))
        except EtcdError:
            if self.dead():
                raise Killed(self.src) from None
            raise
        except PSError as e:
            if self.dead():
                raise Killed(self.src) from None
            raise EtcdError(str(e)) from None
        if self.dead():
            raise Killed(self.src)
        return out

    def get(self, key: str, serializable: bool = False):
        """A read (serializable or not: the simulated etcd is one member, both read its store)."""
        return self._call(lambda: self.w.etcd.get(key))

    def get_prefix(self, prefix: str):
        return self._call(lambda: self.w.etcd.get_prefix(prefix))

    def put(self, key: str, value, lease: int = 0) -> None:
        return self._call(lambda: self.w.etcd.put(key, value, lease))

    def cas(self, key: str, expect_mod_revision: int, value, lease: int = 0, also_put=(), also_compare=(),
            also_delete=()) -> bool:
        return self._call(lambda: self.w.etcd.cas(key, expect_mod_revision, value, lease, also_put, also_compare,
                                                  also_delete))

    def grant(self, ttl: int, timeout: float | None = None) -> int:
        return self._call(lambda: self.w.etcd.grant(ttl))

    def keepalive(self, lease: int, timeout: float | None = None) -> int:
        return self._call(lambda: self.w.etcd.keepalive(lease))

    def revoke(self, lease: int) -> None:
        """Like the real client: an unreachable etcd is swallowed (the lease then runs out)."""
        try:
            self._call(lambda: self.w.etcd.revoke(lease))
        except EtcdError:
            pass


class SimFuture:
    def __init__(self, vt: VirtualTime, baton: Baton) -> None:
        self.vt, self.baton = vt, baton

    def result(self, timeout: float | None = None) -> Any:
        self.vt.join(self.baton)
        if self.baton.error is not None:
            raise self.baton.error
        return self.baton.result


class SimPool(Executor):
    """The client's ThreadPoolExecutor: each task a thread under the virtual clock's baton."""

    def __init__(self, vt: VirtualTime, prefix: str) -> None:
        self.vt, self.prefix, self.n = vt, prefix, 0

    def submit(self, fn, /, *args, **kwargs) -> SimFuture:  # type: ignore[override]
        self.n += 1
        return SimFuture(self.vt, self.vt.spawn(lambda: fn(*args, **kwargs), f"{self.prefix}-{self.n}"))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


__all__ = ["Killed", "SimEtcdClient", "SimFuture", "SimPool", "SimStatusError", "SimStub"]
