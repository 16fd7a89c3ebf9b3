"""Worker membership in etcd: where it is kept, how it is read, and a worker's side of it.

psnodes/core/membership.py decides (who counts, who is dropped, where a joiner starts); this
module reads and writes etcd for it. Two kinds of key, under `<prefix>workers/`:

- `record`: `{"generation": g, "members": {name: {"start": s, "lease": l}}}`, changed only by
  compare-and-swap on its mod revision, so every generation has one writer; a change of who
  counts is a new generation (a config worker's first registration only fills in its lease, at
  the same generation: nobody new counts, and nodes gate by the names and starts alone);
- `live/<name>`: `{"incarnation": i}`, a worker's registration, put under its own lease of
  `member_ttl_s` seconds and kept alive from a background loop. A dead worker's registration
  is deleted by etcd when the lease runs out; a reconcile by a shard primary then drops it.

The writers are the shard primaries (reconcile: joins and expiries, psnodes/membership/member_watch.py),
whose compare-and-swap also compares each admitted worker's registration, and a worker leaving
gracefully: it takes itself out and deletes its registration in one transaction, at once. A
BSP/SSP worker registers, waits until the record names it under its lease, starts at the step
the record gives it, and steps only while its lease surely lives (WorkerMembership.hold).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Callable

from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.core import lease, membership
from pschaos.psnodes.core.membership import Change, Record
from pschaos.psnodes.errors import PSError
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.runtime import Runtime

POLL_S = 0.05           # a joining worker's poll of the record (and a fenced one's of its lease)
RETRY_S = 0.2           # a keepalive etcd did not answer is tried again this soon
LESSOR_SLACK_S = 1.0    # beyond the TTL: etcd's lessor checks expiry every 500 ms


class NotAdmitted(PSError):
    """The record did not name this worker within member_join_timeout_s."""


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
    """A node's `member-view`: the generation it gates by from now on, each member's start and
    lease (0: a config worker not registered yet), so a checker tells incarnations apart."""
    return {"shard": shard, "generation": rec.generation, "members": rec.starts(),
            "leases": {n: m.lease for n, m in sorted(rec.members.items())}}


def joined_still_registered(cfg: ClusterConfig, snap: Snapshot, changes: list[Change]) -> list[tuple[str, int]]:
    """What a reconcile's compare-and-swap also compares: the registration of every worker it
    admits is still the one it read (a worker that left or expired meanwhile is not admitted)."""
    return [(live_key(cfg, c.worker), snap.registered_at[c.worker]) for c in changes if c.kind == "join"]


def plan(snap: Snapshot, primary: bool, front: int, workers: int,
         overdue: set[str] | frozenset = frozenset()) -> tuple[Record, tuple[Record, list[Change]] | None]:
    """A node's poll: the record to gate by (the implicit generation 0 before one is written), and
    what a primary should write by compare-and-swap (None: nothing)."""
    view = snap.record if snap.record is not None else membership.bootstrap(workers)
    write = membership.reconcile(snap.record, snap.registered, front, workers, overdue) if primary else None
    return view, write


class JoinGrace:
    """When this copy first saw each config worker still unregistered, on its own clock: one not
    registered within member_join_grace_s is overdue, and a primary's reconcile drops it (a
    config worker that died while starting must not hold the barrier forever)."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.since: dict[str, float] = {}

    def overdue(self, snap: Snapshot, workers: int, now: float) -> set[str]:
        waiting = [n for n in membership.unregistered(snap.record, workers) if n not in snap.registered]
        self.since = {n: self.since.get(n, now) for n in waiting}
        return membership.overdue_workers(self.since, now, self.grace_s)


class Fenced(PSError):
    """This worker's lease may have expired (no keepalive confirmed for member_ttl_s less
    member_margin_s): the barrier may no longer count it, so the step must not be pushed."""


class WorkerMembership:
    """One BSP/SSP worker's registration: join (register, wait to be named, learn the start step),
    keep the lease alive, and leave.

    The worker trains only while its lease surely lives (`valid`: until the send time of its last
    confirmed keepalive plus the TTL, less `member_margin_s`, pschaos.psnodes.core.lease), as a primary
    acks only under its lease: a worker cut off from etcd (or paused) is dropped from the record
    once etcd lets the lease run out, and must not go on training outside the barrier meanwhile.
    `lost` is set when the lease is found gone (a keepalive answered "no such lease"), or when etcd
    has not confirmed it for so long that it surely ran out; the worker then joins again."""

    def __init__(self, cfg: ClusterConfig, name: str, etcd, runtime: Runtime, events: EventLog,
                 incarnation: int, should_stop: Callable[[], bool] = lambda: False) -> None:
        self.cfg, self.name, self.etcd, self.rt, self.events = cfg, name, etcd, runtime, events
        self.incarnation = incarnation
        self.should_stop = should_stop
        self.lease = 0
        self.start = 0
        self.generation = 0
        self.lost = False
        self.stopped = False
        self.pool = None
        self.valid_until = -math.inf      # monotonic: the lease surely lives before this
        self.seen = -math.inf             # monotonic: when etcd last confirmed the lease

    def valid(self) -> bool:
        """The registration surely lives now (and was not found gone): the worker may step."""
        return bool(self.lease) and not self.lost and lease.valid(self.rt.monotonic(), self.valid_until)

    def surely_gone(self) -> bool:
        """etcd has confirmed nothing for longer than a TTL (and its lessor's check): the lease ran
        out even if etcd cannot say so yet, so the worker registers again rather than wait."""
        return bool(self.lease) and self.rt.monotonic() - self.seen > self.cfg.member_ttl_s + LESSOR_SLACK_S

    def _confirmed(self, sent: float, ttl: float) -> None:
        """etcd confirmed the lease, at some moment after `sent`, for `ttl` seconds."""
        self.valid_until = lease.renewed(self.valid_until, sent, ttl, self.cfg.member_margin_s)
        self.seen = max(self.seen, self.rt.monotonic())

    def join(self, timeout: float | None = None) -> int | None:
        """Register under a fresh lease and wait until the record names this worker under it;
        returns the clock it starts at, or None when the worker was told to stop meanwhile.
        Retries etcd errors until `timeout` (member_join_timeout_s), then raises NotAdmitted."""
        timeout = self.cfg.member_join_timeout_s if timeout is None else timeout
        end = self.rt.monotonic() + timeout
        last: Exception | None = None
        self.lease = 0
        while self.rt.monotonic() < end:
            if self.should_stop():
                return None
            try:
                if not self.lease:
                    sent = self.rt.monotonic()
                    lease_id = self.etcd.grant(self.cfg.member_ttl_s)
                    self.lease, self.lost, self.valid_until, self.seen = lease_id, False, -math.inf, -math.inf
                    self._confirmed(sent, self.cfg.member_ttl_s)
                    self.etcd.put(live_key(self.cfg, self.name), json.dumps({"incarnation": self.incarnation}),
                                  lease=lease_id)
                    self.events.emit("member-register", {"worker": self.name, "lease": lease_id,
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
            if self.lost or self.surely_gone():     # the lease ran out before we were named: register again
                self.lease = 0
            self.rt.sleep(POLL_S)
        raise NotAdmitted(f"{self.name}: not named in the membership record within member_join_timeout_s="
                          f"{timeout} (lease {self.lease}); last error: {last}")

    def hold(self) -> bool:
        """Before a step: wait while the lease may have expired but was not found gone (etcd
        unreachable: a keepalive may yet renew it). Returns True when the worker may step, False
        when it must join again (lost, or surely gone) or stop. Emits `member-fenced` once."""
        if self.valid():
            return True
        fenced = False
        while not self.should_stop():
            if self.lost or self.surely_gone():
                if not self.lost:
                    self.lost = True
                    self.events.emit("member-lost", {"worker": self.name, "lease": self.lease,
                                                     "reason": "etcd confirmed no keepalive for a TTL"})
                return False
            if self.valid():
                self.events.emit("member-unfenced", {"worker": self.name, "lease": self.lease})
                return True
            if not fenced:
                fenced = True
                self.events.emit("member-fenced", {"worker": self.name, "lease": self.lease,
                                                   "reason": "no keepalive confirmed within member_ttl_s "
                                                             "less member_margin_s"})
            self.rt.sleep(POLL_S)
        return False

    def _keep_alive(self) -> None:
        if self.pool is None:
            self.pool = self.rt.pool(1, f"{self.name}-member")
            self.pool.submit(self._loop)

    def _loop(self) -> None:
        """Refresh the lease every third of its TTL (in short sleeps, so a stop ends it at once),
        and every RETRY_S after a keepalive etcd did not answer."""
        wait = self.cfg.member_ttl_s / 3
        while not self.stopped:
            waited = 0.0
            while waited < wait and not self.stopped:
                self.rt.sleep(min(0.1, wait - waited))
                waited += 0.1
            if not self.stopped:
                wait = self.keepalive_once()

    def keepalive_once(self) -> float:
        """One keepalive: a confirmed one renews `valid_until` from its send time, one that finds
        the lease gone sets `lost`. Returns how long to wait before the next."""
        period = self.cfg.member_ttl_s / 3
        lease_id = self.lease
        if not lease_id or self.lost:
            return period
        sent = self.rt.monotonic()
        try:
            ttl = self.etcd.keepalive(lease_id, timeout=min(1.0, period))
        except PSError:
            return RETRY_S          # etcd away: try again soon; the lease may yet survive
        if lease_id != self.lease:
            return period
        if ttl <= 0:
            self.lost = True
            self.events.emit("member-lost", {"worker": self.name, "lease": lease_id,
                                             "reason": "lease gone at keepalive"})
        else:
            self._confirmed(sent, ttl)
        return period

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
