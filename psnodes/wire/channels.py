"""gRPC channel and server options in one place: message limits, keepalive, fast reconnects.

Failover time depends on how fast a dead peer is noticed and a new one is dialled, so every
channel gets short reconnect backoff and keepalive; every call carries the cluster token.

A frozen peer (SIGSTOP, a hung host) keeps its TCP connections up: the kernel still acks every
byte, so a call to it waits for its deadline (rpc_timeout_s, 2 s). Channels do NOT close such a
connection on an unanswered keepalive PING: a PING queued behind a slow upload (a 200 kB push
under a 100 kB/s cap) waits as long as the data ahead of it, so no ping timeout tells a frozen
peer from a slow one, and a short one (250 ms, tried) killed every large push under a bandwidth
cap, forever. Instead the PS client gives up a call when the shard record in etcd names the
primary's successor (pschaos.psnodes.client.shard_calls.ShardCalls._call_primary): the replicas' detector is what knows
the primary is gone, and the worker follows it within DEPOSED_CHECK_S.

`grpc.keepalive_timeout_ms` is not a ping timeout here (gRPC 1.5x reads that from
`grpc.http2.ping_timeout_ms`), but gRPC C-core also sets it as the client socket's
TCP_USER_TIMEOUT: the kernel then closes a connection (ETIMEDOUT, "Stream removed") once sent
data stays unacknowledged, or the peer's window stays shut, that long. At 500 ms that turned a
bandwidth cap into a cut: an 800 kB upload under a 100 kB/s cap, whose proxy's window stays shut
while it drains, failed within 4 s in each of 4 runs (test_bandwidth_cap_never_cuts_a_long_upload), and
a 200 kB one failed now and then on a loaded host. 20 s is gRPC's own default. What the short
one did is done where it belongs: a killed peer on loopback resets at once; a frozen or cut
primary is left through etcd (the deposed watch above); a call on a cut link ends at its
deadline (DEADLINE_EXCEEDED) while TCP retransmits, as the twin's network models it
(harness/backends/sim/network.py; its TCP gives up after tcp_retries2, not at this 20 s, which no call's
deadline reaches). A frozen or cut-off replica leaves the ISR when its primary, its call still
in flight past suspect_s, probes it and gets no answer (psnodes/replication/replication.py), without
waiting for that call to fail at its deadline (a call that fails drops it too, as before).
"""
from __future__ import annotations

import grpc

TOKEN_HEADER = "x-pschaos-token"
PEER_HEADER = "x-pschaos-peer-token"      # node-to-node calls (Replicate) carry this one as well
KEEPALIVE_TIMEOUT_MS = 20_000    # also each client socket's TCP_USER_TIMEOUT (module docstring)


def channel_options(max_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_bytes),
        ("grpc.max_receive_message_length", max_bytes),
        ("grpc.initial_reconnect_backoff_ms", 20),
        ("grpc.min_reconnect_backoff_ms", 20),
        ("grpc.max_reconnect_backoff_ms", 200),
        ("grpc.keepalive_time_ms", 1000),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
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
        ("grpc.http2.min_ping_interval_without_data_ms", 500),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.so_reuseport", 0),
        ("grpc.http2.lookahead_bytes", 8 << 20),
    ]


def dial(address: str, max_bytes: int) -> grpc.Channel:
    return grpc.insecure_channel(address, options=channel_options(max_bytes))


def auth(token: str, peer_token: str = "") -> tuple[tuple[str, str], ...]:
    return ((TOKEN_HEADER, token), (PEER_HEADER, peer_token)) if peer_token else ((TOKEN_HEADER, token),)


def check_loopback(address: str, field: str) -> None:
    """Every server binds loopback only; refuse anything else with the field named."""
    from pschaos.psnodes.errors import ConfigError

    host = address.rsplit(":", 1)[0]
    if host not in ("127.0.0.1", "localhost"):
        raise ConfigError(f"{field}={address!r}: psnodes binds 127.0.0.1 only; use 127.0.0.1:PORT")
