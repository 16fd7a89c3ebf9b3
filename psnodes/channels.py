"""gRPC channel and server options in one place: message limits, keepalive, fast reconnects.

Failover time depends on how fast a dead peer is noticed and a new one is dialled, so every
channel gets short reconnect backoff and keepalive; every call carries the cluster token.

A frozen peer (SIGSTOP, a hung host) keeps its TCP connections up: the kernel still acks every
byte, so only an HTTP/2 PING it does not answer shows it. After KEEPALIVE_MS without reading
anything a channel pings, and a PING unanswered for PING_TIMEOUT_MS closes the connection, failing
its calls UNAVAILABLE at once (retried elsewhere) instead of at their deadline (rpc_timeout_s,
2 s). The gRPC core used here (1.5x and later) enforces that wait with `grpc.http2.ping_timeout_ms`
(default one minute); `grpc.keepalive_timeout_ms` alone never fired, so a worker pushing to a
paused primary waited its whole 2 s deadline after the replicas had elected a successor in 0.2 s
(pause-primary's failover: 2.0 s). A busy connection never pings (reading resets the timer), and
a PING queued behind a slow upload (a bandwidth cap) has PING_TIMEOUT_MS beyond KEEPALIVE_MS of
silence to get through. Clients' channels (workers, the harness, a replica's probe) drop a frozen
peer so; replication channels do not (`drop_frozen=False`, see channel_options).
"""
from __future__ import annotations

import grpc

TOKEN_HEADER = "x-pschaos-token"
PEER_HEADER = "x-pschaos-peer-token"      # node-to-node calls (Replicate) carry this one as well
KEEPALIVE_MS = 200            # ping after this long without reading anything
PING_TIMEOUT_MS = 250         # a ping unanswered this long closes the connection (a frozen peer)


def channel_options(max_bytes: int, drop_frozen: bool = True) -> list[tuple[str, int]]:
    """`drop_frozen`: close the connection to a peer that stops answering pings (a client's
    channel). A replication channel keeps the old, patient keepalive (1 s, and gRPC's default ping
    timeout): its call rides out a short cut and is delivered once the cut heals, as before,
    instead of failing and starting over from an unknown peer position on a new connection."""
    keepalive = [("grpc.keepalive_time_ms", KEEPALIVE_MS), ("grpc.keepalive_timeout_ms", PING_TIMEOUT_MS),
                 ("grpc.http2.ping_timeout_ms", PING_TIMEOUT_MS)] if drop_frozen else \
        [("grpc.keepalive_time_ms", 1000), ("grpc.keepalive_timeout_ms", 500)]
    return [
        ("grpc.max_send_message_length", max_bytes),
        ("grpc.max_receive_message_length", max_bytes),
        ("grpc.initial_reconnect_backoff_ms", 20),
        ("grpc.min_reconnect_backoff_ms", 20),
        ("grpc.max_reconnect_backoff_ms", 200),
        *keepalive,
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.enable_retries", 0),
        ("grpc.http2.lookahead_bytes", 8 << 20),
    ]


def server_options(max_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_bytes),
        ("grpc.max_receive_message_length", max_bytes),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_MS // 2),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.so_reuseport", 0),
        ("grpc.http2.lookahead_bytes", 8 << 20),
    ]


def dial(address: str, max_bytes: int, drop_frozen: bool = True) -> grpc.Channel:
    return grpc.insecure_channel(address, options=channel_options(max_bytes, drop_frozen))


def auth(token: str, peer_token: str = "") -> tuple[tuple[str, str], ...]:
    return ((TOKEN_HEADER, token), (PEER_HEADER, peer_token)) if peer_token else ((TOKEN_HEADER, token),)


def check_loopback(address: str, field: str) -> None:
    """Every server binds loopback only; refuse anything else with the field named."""
    from .errors import ConfigError

    host = address.rsplit(":", 1)[0]
    if host not in ("127.0.0.1", "localhost"):
        raise ConfigError(f"{field}={address!r}: psnodes binds 127.0.0.1 only; use 127.0.0.1:PORT")
