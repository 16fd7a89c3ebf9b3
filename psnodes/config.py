"""Cluster configuration shared by nodes and workers, and the routing records kept in etcd.

The routing table names nodes (`shard-0/1`, `worker-0`), never addresses. Each process is given
a link map (node name -> address it dials); by default every node's own listen address, but a
harness may point any directed link at a fault proxy without psnodes knowing.
"""
from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pschaos.psnodes.core.detector import DETECTORS, Detector, PhiParams, ceiling as phi_ceiling, make as make_detector
from pschaos.psnodes.wire.bulkhead import threads_problem
from pschaos.psnodes.errors import ConfigError
from pschaos.psnodes.wire.limits import Limits
from pschaos.psnodes.store.optimizers import OptimizerConfig
from pschaos.psnodes.placement import node_name

MODES = ("sync", "async")


@dataclass
class ClusterConfig:
    cluster_id: str
    etcd: str                                   # etcd client URL, http://127.0.0.1:PORT
    shards: int = 2                             # shards at start; the routing record in etcd has the current set
    max_shards: int = 0                         # shard groups with addresses (scale-out room); 0 = shards
    copies: int = 3                             # primary + replicas per shard
    workers: int = 2
    mode: str = "sync"
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    # the node-to-node secret: Replicate calls must carry it too, so a client that holds only the
    # cluster token (a worker: it is given `client_view()`) can never pose as a primary. A config
    # file without the field loads with "" (no separation: any holder of the cluster token may
    # replicate), so an older file keeps working; a new config gets a fresh secret
    peer_token: str = field(default_factory=lambda: secrets.token_hex(16))
    tables: dict[str, int] = field(default_factory=dict)
    optimizer: dict = field(default_factory=lambda: {"name": "adam", "lr": 0.01})
    seed: int = 0
    addresses: dict[str, str] = field(default_factory=dict)   # node name -> listen host:port
    metrics_ports: dict[str, int] = field(default_factory=dict)  # node name -> Prometheus port
    workdir: str = "."
    heartbeat_s: float = 0.05                   # primary -> replica heartbeat period
    # how a replica decides its primary is gone (pschaos.psnodes.core.detector): "phi" (accrual over the
    # gaps between the primary's calls, never before phi_floor_s of silence) or "fixed" (after
    # suspect_s of silence, the old rule, kept for comparison)
    detector: str = "phi"
    phi_threshold: float = 8.0                  # suspect at phi >= this: one such gap in 10^8
    phi_floor_s: float = 0.15                   # never suspect before this much silence
    phi_pause_s: float = 0.05                   # acceptable pause, added to the mean gap
    phi_min_std_s: float = 0.01                 # the gaps' standard deviation never counts as less
    phi_window: int = 200                       # gaps remembered
    # phi only: a replica whose detector suspects asks the primary (a Status call over each of
    # probe_paths connections at once) before it stands, waiting until the silence reaches
    # suspect_s, at least probe_s: one TCP retransmission (200 ms at least on Linux) plus a margin,
    # so one lost packet of a probe on a lossy link is not read as no answer. A primary that
    # answers on any path as primary of our epoch is slow, not dead, and holds the replica back
    # (probed again every heartbeat) until the silence reaches probe_hold_s; a refused call
    # (killed) stands at once (probe_s 0: no probe, stand when the detector suspects)
    probe_s: float = 0.25
    probe_paths: int = 3
    probe_hold_s: float = 2.0
    # the fixed detector's timeout; also how long a primary waits for a silent replica before it
    # drops it from the ISR (a killed one, whose calls are refused) or probes it (one whose call
    # is still in flight: dropped if no probe path answers, psnodes/replication/replication.py), and the extra
    # period of the restore wait (lease_ttl_s + suspect_s)
    suspect_s: float = 0.3
    follower_margin_s: float = 0.05             # async acks stop this long before a replica may suspect
    candidate_window_s: float = 0.08            # how long candidates wait for each other
    rpc_timeout_s: float = 2.0
    # a node's gRPC threads, and how many of them calls that may wait (a sync push waiting for its
    # replicas, a BSP/SSP pull at its barrier) can never take: those are kept for probes, Replicate,
    # Migrate and Status, so a primary full of waiting calls still answers that it is alive
    # (psnodes/wire/bulkhead.py); a waiting call beyond rpc_threads - rpc_reserve is refused UNAVAILABLE
    # before it applies anything, and retried by the client. 8: two replicas' 3 probe paths, and
    # their Replicate answers
    rpc_threads: int = 32
    rpc_reserve: int = 8
    lease_ttl_s: int = 2
    lease_margin_s: float = 0.3                 # a primary stops acking this long before its lease could expire
    max_lag: int = 256                          # async: entries a replica may trail before pushes wait
    # BSP/SSP membership (psnodes/membership/members.py): a worker whose registration lease is not kept alive
    # for member_ttl_s seconds leaves the barrier (etcd takes whole seconds); nodes read the
    # membership record every member_poll_s
    member_ttl_s: int = 2
    member_poll_s: float = 0.1
    # whether any worker trains BSP/SSP: only then do nodes keep worker membership (MemberWatch's
    # polls, the primaries' record writes) and serve gated pulls; an async-only cluster spends
    # nothing on it. A config file without the field keeps membership on (the safe side)
    barrier: bool = True
    # a BSP/SSP worker stops stepping this long before its registration lease could expire (from
    # the send time of its last confirmed keepalive), as a primary stops acking: past that, etcd
    # may have dropped it from the barrier while it still trains
    member_margin_s: float = 0.3
    # a config worker not registered this long after a primary began watching (it died starting,
    # or never started) is dropped from the barrier; it joins at the front if it registers later
    member_join_grace_s: float = 60.0
    # how long a worker tries to be named in the record (etcd unreachable, no primary) before it
    # gives up with a train-error and exits
    member_join_timeout_s: float = 30.0
    # sync acks need this many in-sync copies; 0 = 2 if copies >= 3 else 1. With 2 copies an ack may
    # live on the primary alone: losing it then means a restore (a reported loss), and the lease
    # bound (pschaos.psnodes.server.primacy) keeps that primary from acking once a restore may happen
    min_isr: int = 0
    checkpoint_interval_s: float = 2.0
    max_message_bytes: int = 256 << 20
    log_entries: int = 4096
    # per-request limits (pschaos.psnodes.wire.limits.Limits: max_dims, max_elements, max_request_elements,
    # max_ids, max_tensors, max_abs_grad, max_name_bytes); {} = the documented defaults
    limits: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"mode={self.mode!r} is unknown; use 'sync' or 'async'")
        for f in ("shards", "copies"):
            if getattr(self, f) < 1:
                raise ConfigError(f"{f}={getattr(self, f)} must be at least 1")
        if self.workers < 0:
            raise ConfigError(f"workers={self.workers} must be >= 0")
        for t, d in self.tables.items():
            if int(d) < 1:
                raise ConfigError(f"tables[{t!r}]={d} must be a positive embedding dim")
        self.optimizer_config()
        self.request_limits()
        if self.min_isr == 0:
            self.min_isr = 2 if self.copies >= 3 else 1
        if not 1 <= self.min_isr <= self.copies:
            raise ConfigError(f"min_isr={self.min_isr} must be between 1 and copies={self.copies}")
        if isinstance(self.member_ttl_s, bool) or not isinstance(self.member_ttl_s, int) \
                or not 1 <= self.member_ttl_s <= 3600:
            raise ConfigError(f"member_ttl_s={self.member_ttl_s!r} must be a whole number of seconds from 1 to 3600 "
                              "(an etcd lease TTL): how long a silent worker still holds the BSP/SSP barrier")
        if isinstance(self.member_poll_s, bool) or not isinstance(self.member_poll_s, (int, float)) \
                or not 0 < self.member_poll_s < self.member_ttl_s:
            raise ConfigError(f"member_poll_s={self.member_poll_s!r} must be > 0 and under member_ttl_s="
                              f"{self.member_ttl_s}: nodes must see a membership change well within a TTL")
        if not isinstance(self.barrier, bool):
            raise ConfigError(f"barrier={self.barrier!r} must be true or false: whether any worker trains BSP/SSP")
        if isinstance(self.member_margin_s, bool) or not isinstance(self.member_margin_s, (int, float)) \
                or not 0 <= self.member_margin_s < self.member_ttl_s / 2:
            raise ConfigError(f"member_margin_s={self.member_margin_s!r} must be >= 0 and under half of member_ttl_s="
                              f"{self.member_ttl_s}: a worker stops stepping this long before its lease could expire")
        for f in ("member_join_grace_s", "member_join_timeout_s"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ConfigError(f"{f}={v!r} must be a number of seconds > 0")
        if not 0 <= self.lease_margin_s < self.lease_ttl_s / 2:
            raise ConfigError(f"lease_margin_s={self.lease_margin_s} must be >= 0 and under half of "
                              f"lease_ttl_s={self.lease_ttl_s}")
        self._check_threads()
        self._check_detector()

    def _check_threads(self) -> None:
        """The RPC pool and its reserve (psnodes/wire/bulkhead.py): whole numbers, a reserve of at
        least one thread and at least one thread left for waiting calls."""
        for f in ("rpc_threads", "rpc_reserve"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"{f}={v!r} must be a whole number of threads (e.g. rpc_threads: 32, "
                                  "rpc_reserve: 8)")
        if not 3 <= self.rpc_threads <= 1024:
            raise ConfigError(f"rpc_threads={self.rpc_threads} must be between 3 and 1024 (e.g. 32)")
        problem = threads_problem(self.rpc_threads, self.rpc_reserve)
        if problem:
            raise ConfigError(problem)

    def _check_detector(self) -> None:
        """The detector's fields, each refused with the fix: the floor must outlast a heartbeat
        (else a replica suspects between two of them) and the follower margin (else async acks
        could outlive the moment a replica may suspect)."""
        if self.detector not in DETECTORS:
            raise ConfigError(f"detector={self.detector!r} is unknown; use 'phi' (adaptive) or 'fixed' "
                              "(suspect_s of silence)")
        if not self.heartbeat_s > 0:
            raise ConfigError(f"heartbeat_s={self.heartbeat_s} must be > 0 (e.g. 0.05)")
        if not self.suspect_s > self.heartbeat_s:
            raise ConfigError(f"suspect_s={self.suspect_s} must be longer than heartbeat_s={self.heartbeat_s}")
        if not 0 < self.phi_threshold <= 30:
            raise ConfigError(f"phi_threshold={self.phi_threshold} must be in (0, 30] (8: one gap in 10^8 "
                              "may be mistaken for a failure)")
        if not self.phi_floor_s > self.heartbeat_s:
            raise ConfigError(f"phi_floor_s={self.phi_floor_s} must be longer than heartbeat_s="
                              f"{self.heartbeat_s}: a replica would suspect between two heartbeats")
        if not self.phi_pause_s >= 0:
            raise ConfigError(f"phi_pause_s={self.phi_pause_s} must be >= 0 (0: no acceptable pause)")
        if not self.phi_min_std_s > 0:
            raise ConfigError(f"phi_min_std_s={self.phi_min_std_s} must be > 0 (e.g. 0.01)")
        if not 0 <= self.probe_s <= self.rpc_timeout_s:
            raise ConfigError(f"probe_s={self.probe_s} must be between 0 (no probe) and rpc_timeout_s="
                              f"{self.rpc_timeout_s} (e.g. 0.25)")
        if not 1 <= self.probe_paths <= 8:
            raise ConfigError(f"probe_paths={self.probe_paths} must be between 1 and 8 connections (e.g. 3)")
        if not self.probe_hold_s >= self.suspect_s:
            raise ConfigError(f"probe_hold_s={self.probe_hold_s} must be >= suspect_s={self.suspect_s}: a primary "
                              "that answers its probes is held at least as long as the fixed timeout (e.g. 2.0)")
        if not 2 <= self.phi_window <= 100_000:
            raise ConfigError(f"phi_window={self.phi_window} must be between 2 and 100000 gaps (e.g. 200)")
        if not 0 <= self.follower_margin_s < self.suspect_floor_s:
            field = "suspect_s" if self.detector == "fixed" else "phi_floor_s"
            raise ConfigError(f"follower_margin_s={self.follower_margin_s} must be >= 0 and under {field}="
                              f"{self.suspect_floor_s}: async acks must stop before a replica may suspect")

    @property
    def suspect_floor_s(self) -> float:
        """The least silence after which any replica may suspect its primary, whatever its
        detector learned: the async follower lease (pschaos.psnodes.core.ack.followers_fresh) is built
        on it, so that no replica can have suspected a primary that still acks."""
        return self.suspect_s if self.detector == "fixed" else self.phi_floor_s

    def phi_params(self) -> PhiParams:
        return PhiParams(threshold=self.phi_threshold, floor_s=self.phi_floor_s, pause_s=self.phi_pause_s,
                         min_std_s=self.phi_min_std_s, window=self.phi_window, first_s=self.heartbeat_s,
                         ceiling_s=phi_ceiling(self.suspect_s, self.phi_floor_s))

    def failure_detector(self) -> Detector:
        """A fresh detector for one replica (each copy keeps its own)."""
        return make_detector(self.detector, self.suspect_s, self.phi_params())

    def optimizer_config(self) -> OptimizerConfig:
        return OptimizerConfig(**self.optimizer)

    def request_limits(self) -> Limits:
        return Limits.from_config(self.limits)

    def shard_nodes(self, shard: int) -> list[str]:
        return [node_name(shard, r) for r in range(self.copies)]

    def all_nodes(self) -> list[str]:
        return [n for i in range(self.shards) for n in self.shard_nodes(i)]

    @property
    def prefix(self) -> str:
        return f"/pschaos/{self.cluster_id}/"

    def shard_key(self, shard: int) -> str:
        return f"{self.prefix}shards/{shard}"

    def leader_key(self, shard: int) -> str:
        return f"{self.prefix}leaders/{shard}"

    def node_key(self, name: str) -> str:
        return f"{self.prefix}nodes/{name}"

    def candidate_prefix(self, shard: int, epoch: int) -> str:
        return f"{self.prefix}candidates/{shard}/{epoch}/"

    def restore_prefix(self, shard: int, epoch: int) -> str:
        """Where live copies post what they hold when every ISR copy of `epoch` is gone."""
        return f"{self.prefix}restore-candidates/{shard}/{epoch}/"

    def retired_key(self, shard: int) -> str:
        """The last epoch of a shard whose group a scale-in retired (its record is gone): a group
        added again later starts above it (psnodes/elastic/retirement.py)."""
        return f"{self.prefix}retired/{shard}"

    def loss_key(self, shard: int, epoch: int) -> str:
        return f"{self.prefix}losses/{shard}/{epoch}"

    def checkpoint_dir(self, shard: int) -> Path:
        return Path(self.workdir) / "checkpoints" / f"shard-{shard}"

    def data_dir(self, name: str) -> Path:
        return Path(self.workdir) / "data" / name.replace("/", "-")

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2))

    def client_view(self) -> "ClusterConfig":
        """This config as clients (workers, the harness's probes) get it: without the peer token."""
        from dataclasses import replace

        return replace(self, peer_token="")

    @classmethod
    def load(cls, path: str | Path) -> "ClusterConfig":
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"config file {path} is not JSON: {e}") from None
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"config file {path}: unknown field(s) {', '.join(unknown)}")
        data.setdefault("peer_token", "")     # every process reading the file must agree on it
        return cls(**data)


def etcd_url(cfg: ClusterConfig, links: dict[str, str]) -> str:
    """etcd as this process reaches it: through its link map's `etcd` entry when there is one."""
    return f"http://{links['etcd']}" if "etcd" in links else cfg.etcd


def load_links(path: str | None, cfg: ClusterConfig) -> dict[str, str]:
    """The link map a process dials by: its file's entries over the nodes' own addresses."""
    links = dict(cfg.addresses)
    if path:
        try:
            links.update(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as e:
            raise ConfigError(f"link map {path} could not be read: {e}") from None
    return links


@dataclass
class ShardRecord:
    """Who serves a shard: the routing table entry in etcd, changed only by compare-and-swap."""

    epoch: int
    primary: str
    isr: list[str]
    start_seq: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: bytes) -> "ShardRecord":
        return cls(**json.loads(raw))
