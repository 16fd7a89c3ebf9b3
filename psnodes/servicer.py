"""The gRPC boundary of a node: token check, deadlines, and domain errors mapped to status codes."""
from __future__ import annotations

import hmac
from concurrent import futures
from typing import Callable

import grpc

from .channels import TOKEN_HEADER, server_options
from .errors import PSError, abort_with
from .node import ShardNode, deadline_of
from .proto import ps_pb2, ps_pb2_grpc


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuse every call that lacks the cluster token (UNAUTHENTICATED), before any handler runs."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          f"missing or wrong {TOKEN_HEADER} metadata; send the cluster token from the config")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, details):
        got = dict(details.invocation_metadata).get(TOKEN_HEADER, "")
        if isinstance(got, str):
            got = got.encode()
        if not hmac.compare_digest(got, self._token):
            return self._deny
        return continuation(details)


def _guard(fn: Callable) -> Callable:
    def wrapped(self, request, context):
        try:
            return fn(self, request, context)
        except PSError as e:
            abort_with(context, e)
    wrapped.__name__ = fn.__name__
    return wrapped


class Servicer(ps_pb2_grpc.ParameterServerServicer):
    def __init__(self, node: ShardNode) -> None:
        self.node = node
        self.timeout = node.cfg.rpc_timeout_s

    @_guard
    def Push(self, request, context):
        return self.node.push(request, deadline_of(context, self.timeout))

    @_guard
    def Pull(self, request, context):
        return self.node.pull(request, deadline_of(context, self.timeout))

    @_guard
    def Replicate(self, request, context):
        return self.node.replicate(request)

    @_guard
    def Snapshot(self, request, context):
        man = self.node.checkpoint()
        return ps_pb2.SnapshotReply(seq=man["seq"], path=man["path"], bytes=man["bytes"])

    @_guard
    def Status(self, request, context):
        return self.node.status(request)

    def Echo(self, request, context):
        return request


def make_server(node: ShardNode, address: str, workers: int = 16) -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc"),
                         interceptors=[TokenInterceptor(node.cfg.token)],
                         options=server_options(node.cfg.max_message_bytes))
    ps_pb2_grpc.add_ParameterServerServicer_to_server(Servicer(node), server)
    if server.add_insecure_port(address) == 0:
        from .errors import ConfigError
        raise ConfigError(f"cannot bind {address}: the port is taken; pick another in addresses")
    return server
