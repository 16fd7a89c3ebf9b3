"""The PS client workers use: placement, routing from etcd, retries with idempotency keys.

A push to a shard carries (worker, incarnation, request id); after a failover the client
re-reads the route and sends the *same* key to the new primary, which answers from its applied
set if the update already landed, so a retried push is applied exactly once. The incarnation
(this process's start time) keeps a restarted worker's fresh ids from colliding with its old
ones; request ids count per shard, so each shard's applied set is one interval per process.
Every push also adds 1 to this worker's slot of the shard's audit tensor (the harness's
independent count of applied pushes). A push refused NOT_FOUND (an INIT lost in an async
failover) re-offers the initial values and retries. Every push is recorded as an
invoke/ok/fail/info operation in the worker's event log (the harness's history).

PSClient builds on ShardCalls (shard_calls.py: routing, retries, the deposed-primary watch), the
way one call reaches a shard's primary; this module is what a worker does with the cluster:
initial values, pushes (split by owner, re-routed when keys moved) and pulls.
"""
from __future__ import annotations

import itertools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from pschaos.psnodes.wire.codec import rows_to_pb, tensor_from_pb, tensor_to_pb
from pschaos.psnodes.config import ClusterConfig
from pschaos.psnodes.store.digest import dense_digest
from pschaos.psnodes.errors import NotFound, PSError, StaleRouting
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.placement import AUDIT_SLOTS, audit_name, bucket_names, owner, row_owners
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.client.shard_calls import ShardCalls, Unavailable
from pschaos.psnodes.runtime import REAL, Runtime


@dataclass
class PullResult:
    dense: dict[str, np.ndarray] = field(default_factory=dict)
    bytes: int = 0


class PSClient(ShardCalls):
    """A worker's client of the PS cluster: its pushes and pulls, each a call of ShardCalls."""

    def __init__(self, cfg: ClusterConfig, name: str, links: dict[str, str] | None = None,
                 events: EventLog | None = None, call_timeout: float | None = None,
                 retry_budget: float = 20.0, *, runtime: Runtime = REAL, etcd=None,
                 stub_factory: Callable[[str], object] | None = None) -> None:
        """`runtime`, `etcd` and `stub_factory` are the machine: the real ones by default, the
        simulator's (virtual time, simulated etcd and network) in a simulated run."""
        super().__init__(cfg, name, links, call_timeout, retry_budget, runtime, etcd, stub_factory)
        self.limits = cfg.request_limits()
        self.events = events or EventLog(None, name)
        self._pulled_routing = 0          # the routing epoch of the pull cursors in `versions`
        self.incarnation = int(runtime.time() * 1e6)      # this process (µs); part of every idempotency key
        self._req_ids: defaultdict[int, itertools.count] = defaultdict(lambda: itertools.count(1))
        m = re.fullmatch(r"worker-(\d+)", name)
        self.audit_slot = int(m.group(1)) if m and int(m.group(1)) < AUDIT_SLOTS else None
        #: the worker's current dense values, re-offered as INIT when a push finds a tensor missing
        self.current_values: Callable[[], dict[str, np.ndarray]] | None = None
        self._ops = itertools.count(1)
        self.versions: dict[int, tuple[int, int]] = {}   # shard -> (epoch, seq) of the last dense pull
        #: shard -> the dense state this client assembled from its pulls (the full pull, then each
        #: delta over it), digested against the server's state on every delta pull (pschaos.psnodes.store.digest)
        self.copies: dict[int, dict[str, np.ndarray]] = {}
        self.pushed_bytes = 0
        self.pulled_bytes = 0

    # --------------------------------------------------------------- writes
    def init_dense(self, params: dict[str, np.ndarray], shards: list[int] | None = None) -> None:
        """Offer initial values (set-if-absent: the first worker's values win, all workers agree),
        with zeros for each shard's audit tensor. `shards` limits the offer to those shards."""
        end = self.rt.monotonic() + self.retry_budget
        while True:
            r = self.routing
            wanted = r.shards if shards is None else [s for s in shards if s in r.shards]
            by_shard: dict[int, list] = {s: [tensor_to_pb(audit_name(s), np.zeros(AUDIT_SLOTS, np.float32))]
                                         for s in wanted}
            zeros = {b: np.zeros(AUDIT_SLOTS, np.float32) for b in bucket_names()} if self.audit_slot is not None else {}
            for n, a in {**params, **zeros}.items():
                s = owner(n, r.shards)
                if s in by_shard:
                    by_shard[s].append(tensor_to_pb(n, a))
            try:
                for shard, tensors in by_shard.items():
                    upd = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=tensors)
                    self.call(shard, "Push", lambda ep, s=shard, u=upd: ps_pb2.PushRequest(
                        shard=s, epoch=ep, update=u, routing_epoch=r.epoch))
                return
            except StaleRouting:
                if self.rt.monotonic() > end:
                    raise
                self._reroute_wait()

    def _audit(self, name: str) -> ps_pb2.Tensor:
        """The audit gradient of one push: -1 at this worker's slot (plain SGD lr 1 adds +1)."""
        g = np.zeros(AUDIT_SLOTS, np.float32)
        g[self.audit_slot] = -1.0
        return tensor_to_pb(name, g)

    def _add_audit(self, shard: int, upd: ps_pb2.Update) -> None:
        """The shard's pinned audit tensor and every migrating audit bucket it owns, +1 each."""
        if self.audit_slot is None:
            return
        upd.dense.append(self._audit(audit_name(shard)))
        for b in bucket_names():
            if owner(b, self.routing.shards) == shard:
                upd.dense.append(self._audit(b))

    def push(self, dense: dict[str, np.ndarray], sparse: dict[str, tuple[np.ndarray, np.ndarray]],
             clock: int = -1) -> dict[int, ps_pb2.PushReply | None]:
        """Push gradients to every shard they touch, in parallel; returns each shard's reply (None: failed)."""
        per: dict[int, ps_pb2.Update] = {}

        def update(s: int) -> ps_pb2.Update:
            if s not in per:
                per[s] = ps_pb2.Update(worker=self.name, incarnation=self.incarnation, clock=clock)
            return per[s]
        shards = self.routing.shards
        for n, g in dense.items():
            update(owner(n, shards)).dense.append(tensor_to_pb(n, g))
        for table, (ids, grads) in sparse.items():
            homes = row_owners(table, ids, shards)
            for s in np.unique(homes).tolist():
                m = homes == s
                update(s).sparse.append(rows_to_pb(table, ids[m], grads[m], grads.shape[1]))
        if clock >= 0:   # every shard hears every clock tick, for BSP/SSP
            for s in shards:
                update(s)
        for s, upd in per.items():
            upd.req_id = next(self._req_ids[s])     # per shard: one applied interval per process
            self._add_audit(s, upd)
        futs = {s: self.pool.submit(self._push_one, s, u) for s, u in per.items()}
        return {s: f.result() for s, f in futs.items()}

    def _push_one(self, shard: int, upd: ps_pb2.Update, depth: int = 0) -> ps_pb2.PushReply | None:
        op = f"{self.name}:{next(self._ops)}"
        val = {"worker": self.name, "incarnation": upd.incarnation, "req_id": upd.req_id, "shard": shard,
               "clock": upd.clock,
               "keys": [t.name for t in upd.dense] + [f"{r.table}[{len(r.ids) // 8}]" for r in upd.sparse]}
        if upd.HasField("origin"):
            val["origin"] = upd.origin
        if upd.part:
            val["part"] = list(upd.part)
        self.events.emit("push", val, "invoke", op)
        size = upd.ByteSize()
        req = ps_pb2.PushRequest(shard=shard, update=upd)   # built once; a retry only changes the epochs
        end = self.rt.monotonic() + self.retry_budget

        def make(ep: int) -> ps_pb2.PushRequest:
            req.epoch = ep
            req.routing_epoch = self.routing.epoch
            return req
        while True:
            try:
                try:
                    rep = self.call(shard, "Push", make)
                except NotFound as e:            # a tensor's INIT is gone (async failover): offer it again
                    self._reinit(shard, str(e))
                    rep = self.call(shard, "Push", make)   # same idempotency key
                break
            except StaleRouting as e:
                if self.rt.monotonic() > end or depth > 4:
                    self.events.emit("push", {**val, "error": f"routing did not settle: {e}"}, "info", op)
                    return None
                self._reroute_wait()
                parts = self._regroup(shard, upd)
                if self._same(parts, shard, upd):
                    continue                      # a fenced key, or only the epoch moved: retry here
                # the keys now live elsewhere: this op ends here, its parts go on as ops of their own,
                # each with the same request id numbered for the shard it was first sent to
                self.events.emit("push", {**val, "rerouted": sorted(parts), "routing_epoch": self.routing.epoch,
                                          "error": str(e)}, "info", op)
                out = None
                for s, u in parts.items():
                    r = self._push_one(s, u, depth + 1)
                    out = out or r
                return out
            except PSError as e:
                definite = not isinstance(e, Unavailable)
                self.events.emit("push", {**val, "error": str(e)}, "fail" if definite else "info", op)
                return None
        self.pushed_bytes += size
        ok = {**val, "epoch": rep.epoch, "seq": rep.seq, "node": rep.node, "duplicate": rep.duplicate,
              "routing_epoch": rep.routing_epoch}
        if rep.HasField("applied_on"):
            ok["applied_on"] = rep.applied_on
        if rep.applied_as:
            ok["applied_as"] = rep.applied_as
        self.events.emit("push", ok, "ok", op)
        return rep

    def _reroute_wait(self) -> None:
        """A short pause, then the routing record again (a hand-off takes milliseconds)."""
        self.rt.sleep(0.02)
        try:
            self.refresh_routing()
        except PSError:
            pass

    def _regroup(self, shard: int, upd: ps_pb2.Update) -> dict[int, ps_pb2.Update]:
        """A push's keys split by their owners in the current routing, with the audit increments of
        the shard each part now goes to. Each part is an idempotency identity of its own: the push's
        request id, `origin` (the shard that id was numbered for) and `part`, the shards it was split
        to in order, so a shard that applied one part never answers another as a duplicate of it."""
        shards = self.routing.shards
        origin = upd.origin if upd.HasField("origin") else shard
        parts: dict[int, ps_pb2.Update] = {}

        def part(s: int) -> ps_pb2.Update:
            if s not in parts:
                parts[s] = ps_pb2.Update(worker=upd.worker, incarnation=upd.incarnation, clock=upd.clock,
                                         req_id=upd.req_id, kind=upd.kind, origin=origin, part=[*upd.part, s])
            return parts[s]
        for t in upd.dense:
            if not t.name.startswith("__audit__/"):
                part(owner(t.name, shards)).dense.append(t)
        for r in upd.sparse:
            ids = np.frombuffer(r.ids, dtype="<i8")
            data = np.frombuffer(r.data, dtype="<f4").reshape(ids.size, -1) if ids.size else np.zeros((0, r.dim))
            homes = row_owners(r.table, ids, shards)
            for s in np.unique(homes).tolist():
                m = homes == s
                part(s).sparse.append(rows_to_pb(r.table, ids[m], data[m], r.dim))
        if shard in shards and upd.clock >= 0:
            part(shard)
        for s, u in parts.items():
            self._add_audit(s, u)
        return parts

    @staticmethod
    def _same(parts: dict[int, ps_pb2.Update], shard: int, upd: ps_pb2.Update) -> bool:
        if set(parts) != {shard}:
            return False
        p = parts[shard]
        return [t.name for t in p.dense] == [t.name for t in upd.dense] and \
            [(r.table, r.ids) for r in p.sparse] == [(r.table, r.ids) for r in upd.sparse]

    def _reinit(self, shard: int, why: str) -> None:
        """Re-offer INIT (set-if-absent) of this worker's current values for one shard."""
        values = self.current_values() if self.current_values is not None else {}
        names = [n for n in values if owner(n, self.routing.shards) == shard]
        self.events.emit("reinit", {"worker": self.name, "incarnation": self.incarnation, "shard": shard,
                                    "keys": [audit_name(shard), *names], "reason": why})
        self.init_dense(values, shards=[shard])

    # ---------------------------------------------------------------- reads
    def pull_dense(self, min_clock: int = -1) -> PullResult:
        """Dense tensors changed since this client's last pull from each shard (all after a failover)."""
        end = self.rt.monotonic() + self.retry_budget
        while True:
            r = self.routing
            if r.epoch != self._pulled_routing:       # keys moved: every shard's cursor and copy start over
                self.versions.clear()
                self.copies.clear()
                self._pulled_routing = r.epoch
            out = PullResult()
            futs = {s: self.pool.submit(self._pull_dense_one, s, min_clock, r.epoch) for s in r.shards}
            stale: StaleRouting | None = None
            for s, f in futs.items():
                try:
                    arrays, size = f.result()
                except StaleRouting as e:
                    stale = e
                    continue
                out.dense.update(arrays)
                out.bytes += size
            self.pulled_bytes += out.bytes
            if stale is None:
                return out
            if self.rt.monotonic() > end:
                raise stale
            self._reroute_wait()

    def _pull_dense_one(self, shard: int, min_clock: int, routing_epoch: int = 0) -> tuple[dict[str, np.ndarray], int]:
        """One shard's changed tensors and the reply's size; the pull's event records the server's
        state digest beside the digest of this client's copy after the delta (state_crc, copy_crc)."""
        sent: dict = {}

        def make(ep: int) -> ps_pb2.PullRequest:
            last_epoch, last_seq = self.versions.get(shard, (0, 0))
            sent["since"] = last_seq if last_epoch == ep else 0
            sent["cursor_epoch"] = last_epoch
            return ps_pb2.PullRequest(shard=shard, epoch=ep, since_seq=sent["since"], min_clock=min_clock,
                                      worker=self.name, routing_epoch=routing_epoch)
        op = f"{self.name}:{next(self._ops)}"
        val = {"worker": self.name, "shard": shard, "min_clock": min_clock}
        self.events.emit("pull", val, "invoke", op)
        try:
            timeout = max(self.call_timeout, 10.0) if min_clock >= 0 else None
            rep = self.call(shard, "Pull", make, timeout=timeout)
            if sent["since"] and rep.epoch != sent["cursor_epoch"]:
                # answered at another epoch than the cursor's (our route was stale): the node's history
                # after that seq need not be the one the cursor names, so the delta is no delta of ours
                self.versions.pop(shard, None)
                rep = self.call(shard, "Pull", make, timeout=timeout)
            arrays = {t.name: tensor_from_pb(t, check_finite=False, limits=self.limits) for t in rep.dense}
        except PSError as e:
            self.events.emit("pull", {**val, "error": str(e)}, "fail", op)
            raise
        self.versions[shard] = (rep.epoch, rep.seq)
        copy = self._assemble(shard, sent["since"], arrays)
        crcs = {"state_crc": rep.state_crc, "copy_crc": dense_digest(copy)} if rep.HasField("state_crc") else {}
        if rep.HasField("committed"):
            crcs["committed"] = rep.committed
        self.events.emit("pull", {**val, "since": sent["since"], "epoch": rep.epoch, "seq": rep.seq, "node": rep.node,
                                  "keys": [t.name for t in rep.dense], "bytes": rep.bytes, **crcs}, "ok", op)
        return arrays, rep.bytes

    def _assemble(self, shard: int, since: int, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """This client's copy of a shard after a pull: a full pull (since 0) is the whole state, a
        delta replaces the tensors it carries. The arrays are the replies' own (read-only), not copies."""
        copy = self.copies[shard] = dict(arrays) if since == 0 else {**self.copies.get(shard, {}), **arrays}
        return copy

    def _pull_rows_one(self, shard: int, rows, routing_epoch: int):
        """One shard's rows; recorded as a `pull-rows` (the reply's epoch, seq and ISR watermark),
        so the read checks see what a row read returned as they see a dense pull's."""
        op = f"{self.name}:{next(self._ops)}"
        val = {"worker": self.name, "shard": shard, "table": rows.table, "rows": len(rows.ids) // 8}
        self.events.emit("pull-rows", val, "invoke", op)
        try:
            rep = self.call(shard, "Pull", lambda ep: ps_pb2.PullRequest(
                shard=shard, epoch=ep, sparse=[rows], no_dense=True, min_clock=-1, worker=self.name,
                routing_epoch=routing_epoch))
        except PSError as e:
            self.events.emit("pull-rows", {**val, "error": str(e)}, "fail", op)
            raise
        self.events.emit("pull-rows", {**val, "epoch": rep.epoch, "seq": rep.seq, "node": rep.node, "bytes": rep.bytes,
                                       **({"committed": rep.committed} if rep.HasField("committed") else {})}, "ok", op)
        return rep

    def pull_rows(self, table: str, ids: np.ndarray, dim: int) -> np.ndarray:
        """Rows for `ids` (any order, repeats allowed), gathered from their shards."""
        ids = np.asarray(ids, dtype=np.int64)
        out = np.empty((ids.size, dim), dtype=np.float32)
        end = self.rt.monotonic() + self.retry_budget
        while True:
            ro = self.routing
            homes = row_owners(table, ids, ro.shards)
            futs = {}
            for s in np.unique(homes).tolist():
                m = homes == s
                futs[s] = (m, self.pool.submit(self._pull_rows_one, s, rows_to_pb(table, ids[m], None, dim), ro.epoch))
            stale: StaleRouting | None = None
            for s, (m, f) in futs.items():
                try:
                    rep = f.result()
                except StaleRouting as e:
                    stale = e
                    continue
                r = rep.sparse[0]
                out[m] = np.frombuffer(r.data, dtype=np.float32).reshape(-1, dim)
                self.pulled_bytes += rep.bytes
            if stale is None:
                return out
            if self.rt.monotonic() > end:
                raise stale
            self._reroute_wait()
