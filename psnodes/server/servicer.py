"""The gRPC boundary of a node: token check, deadlines, and domain errors mapped to status codes."""
from __future__ import annotations

import hmac
import logging
from concurrent import futures
from typing import Callable

import grpc

from pschaos.psnodes.wire.bulkhead import Bulkhead, threads_problem
from pschaos.psnodes.wire.channels import PEER_HEADER, TOKEN_HEADER, server_options
from pschaos.psnodes.errors import ConfigError, PSError, abort_with
from pschaos.psnodes.server.calls import deadline_of
from pschaos.psnodes.server.node import ShardNode
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc
from pschaos.psnodes.wire.wire import parse, split_push

SERVICE = "pschaos.ps.ParameterServer"
log = logging.getLogger("psnodes.rpc")


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuse every call that lacks the cluster token (UNAUTHENTICATED), and every node-to-node call
    (Replicate) that lacks the peer token when the cluster has one, before any handler runs."""

    def __init__(self, token: str, peer_token: str = "") -> None:
        self._token, self._peer = token.encode(), peer_token.encode()

        def deny(why: str):
            return grpc.unary_unary_rpc_method_handler(
                lambda request, context: context.abort(grpc.StatusCode.UNAUTHENTICATED, why))

        self._deny = deny(f"missing or wrong {TOKEN_HEADER} metadata; send the cluster token from the config")
        self._deny_peer = deny(f"Replicate and Migrate are node-to-node: missing or wrong {PEER_HEADER} metadata "
                               "(only shard nodes hold the peer token; clients never replicate)")

    @staticmethod
    def _matches(md: dict, header: str, want: bytes) -> bool:
        got = md.get(header, "")
        return hmac.compare_digest(got.encode() if isinstance(got, str) else got, want)

    def intercept_service(self, continuation, details):
        md = dict(details.invocation_metadata)
        if not self._matches(md, TOKEN_HEADER, self._token):
            log.debug("refused %s: missing or wrong token", details.method)
            return self._deny
        if self._peer and details.method.endswith(("/Replicate", "/Migrate")) and not self._matches(md, PEER_HEADER, self._peer):
            log.debug("refused %s: missing or wrong peer token", details.method)
            return self._deny_peer
        return continuation(details)


def _guard(fn: Callable) -> Callable:
    """Every handler's boundary: a domain error becomes its status code (and one debug line in the
    node's log); anything else is a bug of ours, logged with its traceback and answered INTERNAL
    with words that say where to look, never gRPC's bare UNKNOWN."""
    def wrapped(self, request, context):
        try:
            return fn(self, request, context)
        except PSError as e:
            log.debug("refused %s: %s %s", fn.__name__, e.code.name, e)
            abort_with(context, e)
        except Exception as e:  # noqa: BLE001 - the boundary: report, never crash the server
            log.exception("%s failed on an unexpected error", fn.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{fn.__name__}: internal error {type(e).__name__}: {e}; "
                                                    "the node's log has the traceback")
    wrapped.__name__ = fn.__name__
    return wrapped


class Servicer(ps_pb2_grpc.ParameterServerServicer):
    """Push and Pull, the calls that may wait for seconds, pass the bulkhead (`waiting`): at most
    its limit of them hold a thread, the rest of the pool is kept for the calls that never wait
    long (Status probes, Replicate, Migrate). Their waits end when the caller cancels
    (`context.is_active`), so a call given up by its client frees its thread and its slot."""

    def __init__(self, node: ShardNode, waiting: Bulkhead) -> None:
        self.node = node
        self.timeout = node.cfg.rpc_timeout_s
        self.waiting = waiting

    @_guard
    def Push(self, request, context):
        req, payload = split_push(request)        # raw bytes: the log keeps a view, no re-serialize
        with self.waiting.admit("Push"):
            return self.node.push(req, deadline_of(context, self.timeout), payload, active=context.is_active)

    @_guard
    def Pull(self, request, context):
        req = parse(ps_pb2.PullRequest, request, "Pull")
        with self.waiting.admit("Pull", pull=True):
            return self.node.pull(req, deadline_of(context, self.timeout), active=context.is_active)

    @_guard
    def Replicate(self, request, context):
        return self.node.replicate(parse(ps_pb2.ReplicateRequest, request, "Replicate"))

    @_guard
    def Snapshot(self, request, context):
        man = self.node.snapshot(parse(ps_pb2.SnapshotRequest, request, "Snapshot"))
        return ps_pb2.SnapshotReply(seq=man["seq"], path=man["path"], bytes=man["bytes"])

    @_guard
    def Status(self, request, context):
        return self.node.status(parse(ps_pb2.StatusRequest, request, "Status"))

    @_guard
    def Migrate(self, request, context):
        return self.node.migrate(parse(ps_pb2.MigrateRequest, request, "Migrate"), deadline_of(context, self.timeout),
                                 active=context.is_active)

    def Echo(self, request: bytes, context) -> bytes:
        """Raw bytes in, the same bytes out: no protobuf parse or serialize on either side, so the
        echo is the wire's ceiling to measure the hot paths against (a Blob-encoded request comes
        back Blob-encoded, so generated stubs keep working)."""
        return request


def _raw(b: bytes) -> bytes:
    return b


def _ser(m) -> bytes:
    return m.SerializeToString()


def handlers(s: Servicer) -> grpc.GenericRpcHandler:
    """The service's method table. Every request arrives as raw bytes and is parsed inside the
    handler (pschaos.psnodes.wire.wire.parse), so a request that does not parse is INVALID_ARGUMENT naming the
    message rather than gRPC's INTERNAL; Pull returns raw bytes (pschaos.psnodes.wire.wire); Echo is raw both ways."""
    def h(fn, de, ser=_ser):
        return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=de, response_serializer=ser)
    return grpc.method_handlers_generic_handler(SERVICE, {
        "Push": h(s.Push, _raw),
        "Pull": h(s.Pull, _raw, _raw),
        "Replicate": h(s.Replicate, _raw),
        "Snapshot": h(s.Snapshot, _raw),
        "Status": h(s.Status, _raw),
        "Echo": h(s.Echo, _raw, _raw),
        "Migrate": h(s.Migrate, _raw),
    })


def make_server(node: ShardNode, address: str, workers: int | None = None, reserve: int | None = None) -> grpc.Server:
    """The node's gRPC server: `workers` threads (cfg.rpc_threads), of which `reserve`
    (cfg.rpc_reserve) are never taken by pushes and pulls (psnodes/wire/bulkhead.py)."""
    workers = node.cfg.rpc_threads if workers is None else workers
    reserve = node.cfg.rpc_reserve if reserve is None else reserve
    problem = threads_problem(workers, reserve)
    if problem:
        raise ConfigError(problem)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc"),
                         interceptors=[TokenInterceptor(node.cfg.token, node.cfg.peer_token)],
                         options=server_options(node.cfg.max_message_bytes))
    name = getattr(node, "name", "this node")
    metrics = getattr(node, "metrics", None)
    count = (lambda method: metrics.busy.labels(method=method).inc()) if metrics is not None else (lambda method: None)
    server.add_generic_rpc_handlers((handlers(Servicer(node, Bulkhead(name, workers - reserve, count))),))
    if server.add_insecure_port(address) == 0:
        raise ConfigError(f"cannot bind {address}: the port is taken; pick another in addresses")
    return server
