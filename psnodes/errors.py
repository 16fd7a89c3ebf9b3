"""Domain errors of psnodes and their one mapping to and from gRPC status codes.

Every failure that crosses the wire is one of these; servicers raise them and the boundary in
`abort_with` turns them into a status, while clients turn a status back with `from_rpc_error`.
Keeping both directions in one table (like python-etcd3's `_EXCEPTIONS_BY_CODE`) means a code
is never interpreted two ways.
"""
from __future__ import annotations

import grpc


class PSError(Exception):
    """Root of every psnodes error."""

    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(PSError):
    """The request is malformed; the message names the field and the fix. State is unchanged."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class Unauthenticated(PSError):
    """The cluster token is missing or wrong."""

    code = grpc.StatusCode.UNAUTHENTICATED


class NotFound(PSError):
    """An unknown table or parameter name."""

    code = grpc.StatusCode.NOT_FOUND


class StaleEpoch(PSError):
    """The sender's epoch is older than ours: it was fenced by a failover."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class StaleRouting(PSError):
    """The caller placed keys by an older routing epoch, or a key it sent is moving to another
    shard (fenced): re-read the routing record and re-route. Its own status code (ABORTED), so it
    is never taken for a failover's FAILED_PRECONDITION; the message starts with STALE_ROUTING."""

    code = grpc.StatusCode.ABORTED


STALE_ROUTING = "stale routing epoch"


class NotPrimary(PSError):
    """This node does not (or no longer) serve as primary for the shard: re-route."""

    code = grpc.StatusCode.UNAVAILABLE


class ReplicationFailed(PSError):
    """A sync-mode push could not reach every in-sync replica and could not shrink the set."""

    code = grpc.StatusCode.UNAVAILABLE


class Busy(PSError):
    """Every thread this node lends to waiting calls (pushes waiting for replication, BSP/SSP pulls
    at their barrier) is taken: the call was refused before anything was applied, so it is safe
    to retry (psnodes/wire/bulkhead.py). UNAVAILABLE, as NotPrimary: clients retry it."""

    code = grpc.StatusCode.UNAVAILABLE


class Cancelled(PSError):
    """The caller cancelled (or its deadline passed) while the server waited for it: the wait
    ends so the handler's thread is free again. Nobody reads the answer."""

    code = grpc.StatusCode.CANCELLED


class Timeout(PSError):
    """The deadline passed (or a BSP/SSP wait did not finish in it)."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class TooLarge(PSError):
    """A message above the configured size limit."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class ConfigError(PSError):
    """Bad configuration given to a node or client, named by field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


_BY_CODE: dict[grpc.StatusCode, type[PSError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: StaleEpoch,
    grpc.StatusCode.UNAVAILABLE: NotPrimary,
    grpc.StatusCode.DEADLINE_EXCEEDED: Timeout,
    grpc.StatusCode.RESOURCE_EXHAUSTED: TooLarge,
    grpc.StatusCode.ABORTED: StaleRouting,
}

#: codes after which a client should refresh its routing and retry the same request
RETRYABLE = (NotPrimary, StaleEpoch, Timeout, ReplicationFailed)


def from_rpc_error(err: grpc.RpcError) -> PSError:
    """Turn a client-side gRPC error into the domain error it stands for."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    cls = _BY_CODE.get(code, PSError)
    exc = cls(details or code.name)
    exc.code = code
    return exc


def abort_with(context: grpc.ServicerContext, exc: PSError) -> None:
    """Abort the RPC with the status code that belongs to `exc` (raises)."""
    context.abort(exc.code, str(exc))
