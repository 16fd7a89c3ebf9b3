"""Worker membership in etcd: where it is kept, how it is read, and a worker's side of it.

psnodes/core/membership.py decides (who counts, who is dropped, where a joiner starts); this
module reads and writes etcd for it. Two kinds of key, under `<prefix>workers/`:

- `record`: `{"generation": g, "members": {name: {"start": s, "lease": l}}}`, changed only by
  compare-and-swap on its mod revision, so every generation has one writer and one content;
- `live/<name>`: `{"incarnation": i}`, a worker's registration, put under its own lease of
  `member_ttl_s` seconds and kept alive from a background loop. A dead worker's registration
  is deleted by etcd when the lease runs out; a reconcile by a shard primary then drops it.

The writers are the shard primaries (reconcile: joins and expiries, psnodes/member_watch.py),
whose compare-and-swap also compares each admitted worker's registration, and a worker leaving
gracefully: it takes itself out and deletes its registration in one transaction, at once. A BSP/SSP worker registers, waits until
the record names it under its lease, and starts at the step the record gives it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .config import ClusterConfig
from .core import membership
from .core.membership import Change, Record
from .errors import PSError
from .events import EventLog
from .runtime import Runtime

JOIN_TIMEOUT_S = 30.0
POLL_S = 0.05           # a joining worker's poll of the record


class NotAdmitted(PSError):
    """The record did not name this worker within the join timeout."""


def prefix(cfg: ClusterConfig) -> str:
    return f"{cfg.prefix}workers/"


def record_key(cfg: ClusterConfig) -> str:
    return f"{prefix(cfg)}record"


def live_key(cfg: ClusterConfig, name: str) -> str:
    return f"{prefix(cfg)}live/{name}"


@dataclass
class Snapshot:
    """What one range read of `<prefix>workers/` says: the record (None: not written yet), its mod
    revision (0: absent, for a compare-and-swap), and the live registrations (name -> lease)."""
    record: Record | None = None
    revision: int = 0
    registered: dict[str, int] = field(default_factory=dict)
    registered_at: dict[str, int] = field(default_factory=dict)     # name -> the registration's mod revision


def parse(kvs, cfg: ClusterConfig) -> Snapshot:
    """A Snapshot from `etcd.get_prefix(prefix(cfg))`; ValueError names a malformed record."""
    out = Snapshot()
    live = f"{prefix(cfg)}live/"
    for kv in kvs:
        if kv.key == record_key(cfg):
            try:
                out.record = membership.from_dict(json.loads(kv.value))
            except json.JSONDecodeError as e:
                raise ValueError(f"{kv.key}: not JSON ({e})") from None
            out.revision = kv.mod_revision
        elif kv.key.startswith(live) and kv.lease:
            out.registered[kv.key[len(live):]] = kv.lease
            out.registered_at[kv.key[len(live):]] = kv.mod_revision
    return out


def encode(rec: Record) -> str:
    return json.dumps(membership.to_dict(rec), sort_keys=True)


def change_event(c: Change, by: str) -> tuple[str, dict]:
    """The history event of a change: `member-join`, `member-leave` or `member-expire`."""
    return f"member-{c.kind}", {"worker": c.worker, "generation": c.generation, "start": c.start,
                                "lease": c.lease, "reason": c.reason, "by": by}


def view_event(shard: int, rec: Record) -> dict:
    """A node's `member-view`: the generation it gates by from now on, and each member's start."""
    return {"shard": shard, "generation": rec.generation, "members": rec.starts()}


def joined_still_registered(cfg: ClusterConfig, snap: Snapshot, changes: list[Change]) -> list[tuple[str, int]]:
    """What a reconcile's compare-and-swap also compares: the registration of every worker it
    admits is still the one it read (a worker that left or expired meanwhile is not admitted)."""
    return [(live_key(cfg, c.worker), snap.registered_at[c.worker]) for c in changes if c.kind == "join"]


def plan(snap: Snapshot, primary: bool, front: int, workers: int) -> tuple[Record, tuple[Record, list[Change]] | None]:
    """A node's poll: the record to gate by (the implicit generation 0 before one is written), and
    what a primary should write by compare-and-swap (None: nothing)."""
    view = snap.record if snap.record is not None else membership.bootstrap(workers)
    write = membership.reconcile(snap.record, snap.registered, front, workers) if primary else None
    return view, write


class WorkerMembership:
    """One BSP/SSP worker's registration: join (register, wait to be named, learn the start step),
    keep the lease alive, and leave. `lost` is set when the lease is found gone (the worker was
    silent for a TTL, e.g. paused or cut off from etcd): the worker then joins again."""

    def __init__(self, cfg: ClusterConfig, name: str, etcd, runtime: Runtime, events: EventLog,
                 incarnation: int) -> None:
        self.cfg, self.name, self.etcd, self.rt, self.events = cfg, name, etcd, runtime, events
        self.incarnation = incarnation
        self.lease = 0
        self.start = 0
        self.generation = 0
        self.lost = False
        self.stopped = False
        self.pool = None

    def join(self, timeout: float = JOIN_TIMEOUT_S) -> int:
        """Register under a fresh lease and wait until the record names this worker under it;
        returns the clock it starts at. Retries etcd errors until `timeout`."""
        end = self.rt.monotonic() + timeout
        last: Exception | None = None
        self.lease = 0
        while self.rt.monotonic() < end:
            try:
                if not self.lease:
                    lease = self.etcd.grant(self.cfg.member_ttl_s)
                    self.etcd.put(live_key(self.cfg, self.name), json.dumps({"incarnation": self.incarnation}),
                                  lease=lease)
                    self.lease, self.lost = lease, False
                    self.events.emit("member-register", {"worker": self.name, "lease": lease,
                                                         "incarnation": self.incarnation})
                    self._keep_alive()
                snap = parse(self.etcd.get_prefix(prefix(self.cfg)), self.cfg)
                m = membership.admitted(snap.record, self.name, self.lease)
                if m is not None:
                    self.start, self.generation = m.start, snap.record.generation
                    self.events.emit("member-admitted", {"worker": self.name, "lease": self.lease,
                                                         "generation": self.generation, "start": m.start})
                    return m.start
            except (PSError, ValueError) as e:
                last = e
            if self.lost:               # the lease ran out before we were named: register again
                self.lease = 0
            self.rt.sleep(POLL_S)
        raise NotAdmitted(f"{self.name}: not named in the membership record within {timeout}s "
                          f"(lease {self.lease}); last error: {last}")

    def _keep_alive(self) -> None:
        if self.pool is None:
            self.pool = self.rt.pool(1, f"{self.name}-member")
            self.pool.submit(self._loop)

    def _loop(self) -> None:
        """Refresh the lease every third of its TTL (in short sleeps, so a stop ends it at once);
        a keepalive that finds the lease gone sets `lost`."""
        period = self.cfg.member_ttl_s / 3
        while not self.stopped:
            waited = 0.0
            while waited < period and not self.stopped:
                self.rt.sleep(min(0.1, period - waited))
                waited += 0.1
            lease = self.lease
            if self.stopped or not lease or self.lost:
                continue
            try:
                if self.etcd.keepalive(lease, timeout=min(1.0, period)) <= 0 and lease == self.lease:
                    self.lost = True
                    self.events.emit("member-lost", {"worker": self.name, "lease": lease,
                                                     "reason": "lease gone at keepalive"})
            except PSError:
                pass            # etcd away: try again next period; the lease may yet survive

    def leave(self) -> None:
        """Take this worker out of the record and delete its registration, in one transaction (a
        reconcile between the two would admit it again as a joiner), then give the lease back; a
        crash leaves both to the lease's TTL."""
        self.stopped = True
        if not self.lease:
            return
        for _ in range(5):
            try:
                snap = parse(self.etcd.get_prefix(prefix(self.cfg)), self.cfg)
                out = membership.leave(snap.record, self.name, self.lease) if snap.record else None
                if out is None:
                    break
                rec, change = out
                if self.etcd.cas(record_key(self.cfg), snap.revision, encode(rec),
                                 also_delete=[live_key(self.cfg, self.name)]):
                    self.events.emit(*change_event(change, self.name))
                    break
            except (PSError, ValueError):
                self.rt.sleep(POLL_S)
        try:
            self.etcd.revoke(self.lease)
        except PSError:
            pass
        self.lease = 0
