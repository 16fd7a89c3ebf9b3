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
"""
from __future__ import annotations

import itertools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import grpc
import numpy as np

from pschaos.psnodes.wire.bulkhead import is_busy_refusal
from pschaos.psnodes.wire.channels import auth, dial
from pschaos.psnodes.wire.codec import rows_to_pb, tensor_from_pb, tensor_to_pb
from pschaos.psnodes.config import ClusterConfig, ShardRecord, etcd_url
from pschaos.psnodes.store.digest import dense_digest
from pschaos.psnodes.elastic import routing
from pschaos.psnodes.core import retry
from pschaos.psnodes.core.deposed import Watch, verdict
from pschaos.psnodes.core.routing import Routing, static
from pschaos.psnodes.errors import RETRYABLE, STALE_ROUTING, NotFound, PSError, StaleRouting, from_rpc_error
from pschaos.psnodes.etcd import Etcd
from pschaos.psnodes.events import EventLog
from pschaos.psnodes.placement import AUDIT_SLOTS, audit_name, bucket_names, owner, row_owners
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc
from pschaos.psnodes.client.record_watch import RecordWatch
from pschaos.psnodes.runtime import REAL, Runtime


ROUTING_CHECK_S = 1.0      # while a shard does not answer, re-read the routing record this often
DEPOSED_CHECK_S = 0.05     # a call in flight looks at its shard record this often (see _call_primary)
BARRIER_CHECK_S = 0.2      # ... a BSP/SSP barrier pull (held by a live primary for seconds) this often


class Deposed(PSError):
    """The shard record named a new primary while a call to the old one was in flight."""

    code = grpc.StatusCode.UNAVAILABLE


class Unavailable(PSError):
    """A shard did not answer within the retry budget (outcome of a push unknown)."""

    code = grpc.StatusCode.UNAVAILABLE


@dataclass
class PullResult:
    dense: dict[str, np.ndarray] = field(default_factory=dict)
    bytes: int = 0


class PSClient:
    def __init__(self, cfg: ClusterConfig, name: str, links: dict[str, str] | None = None,
                 events: EventLog | None = None, call_timeout: float | None = None,
                 retry_budget: float = 20.0, *, runtime: Runtime = REAL, etcd=None,
                 stub_factory: Callable[[str], object] | None = None) -> None:
        """`runtime`, `etcd` and `stub_factory` are the machine: the real ones by default, the
        simulator's (virtual time, simulated etcd and network) in a simulated run."""
        self.cfg, self.name = cfg, name
        self.rt = runtime
        self._stub_factory = stub_factory
        self.limits = cfg.request_limits()
        self.links = links or dict(cfg.addresses)
        self.events = events or EventLog(None, name)
        self.etcd = etcd if etcd is not None else Etcd(etcd_url(cfg, self.links), timeout=0.5)
        self.md = auth(cfg.token)
        self.call_timeout = call_timeout or cfg.rpc_timeout_s
        self.retry_budget = retry_budget
        self.routes: dict[int, ShardRecord] = {}
        #: the routing record (psnodes/elastic/routing.py): which shards own keys; re-read on StaleRouting
        self.routing: Routing = static(cfg.shards)
        self._pulled_routing = 0          # the routing epoch of the pull cursors in `versions`
        self._stubs: dict[str, ps_pb2_grpc.ParameterServerStub] = {}
        self._channels: list[grpc.Channel] = []
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
        self.pool = runtime.pool(max(1, cfg.shards, cfg.max_shards), "ps-client")
        self.pushed_bytes = 0
        self.pulled_bytes = 0
        #: the deposed-primary watch's reads of shard records, one per shard and period for all calls
        self.watch = RecordWatch(self._watch_read, runtime.monotonic)
        self._watch_elsewhere = False     # a stub without futures (the simulator's) runs the watch

    @property
    def watch_reads(self) -> int | None:
        """Etcd reads the deposed-primary watch made: its load on etcd, in the worker's
        train-step/train-done events and report.json's `watch_reads_per_s`. None: the calls went
        through the simulator's stubs, which model the watch themselves and count nothing here."""
        return None if self._watch_elsewhere else self.watch.reads

    # --------------------------------------------------------------- routing
    def refresh_routing(self) -> Routing:
        """Re-read the routing record (an etcd error propagates: the caller retries)."""
        rec, _ = routing.read(self.etcd, self.cfg)
        if rec.epoch >= self.routing.epoch:
            self.routing = rec
        return self.routing

    def _still_routed(self, shard: int) -> None:
        """StaleRouting when the routing record no longer names `shard` (a scale-in this client
        missed retired it: its group is gone, so it answers nothing, never a stale epoch); the
        callers re-route on it as on a node's own stale answer. An etcd that does not answer
        proves nothing: the retries go on."""
        try:
            r = self.refresh_routing()
        except PSError:
            return
        if shard not in r.shards:
            raise StaleRouting(f"{STALE_ROUTING}: shard {shard} is not in routing epoch {r.epoch} "
                               f"(shards {list(r.shards)}); re-route by it")

    def refresh(self, shard: int | None = None) -> None:
        for i in ([shard] if shard is not None else self.routing.shards):
            kv = self.etcd.get(self.cfg.shard_key(i))
            if kv is not None:
                self.routes[i] = ShardRecord.from_json(kv.value)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until every shard has a primary in the routing table."""
        end = self.rt.monotonic() + timeout
        while True:
            try:
                self.refresh_routing()
                self.refresh()
            except PSError:
                pass
            if set(self.routing.shards) <= set(self.routes):
                return
            if self.rt.monotonic() > end:
                raise Unavailable(f"shards without a primary after {timeout}s: "
                                  f"{sorted(set(self.routing.shards) - set(self.routes))}")
            self.rt.sleep(0.05)

    def stub(self, node: str) -> ps_pb2_grpc.ParameterServerStub:
        if node not in self._stubs and self._stub_factory is not None:
            self._stubs[node] = self._stub_factory(node)
        if node not in self._stubs:
            ch = dial(self.links[node], self.cfg.max_message_bytes)
            self._channels.append(ch)
            self._stubs[node] = ps_pb2_grpc.ParameterServerStub(ch)
        return self._stubs[node]

    def call(self, shard: int, method: str, make: callable, timeout: float | None = None):
        """Call the shard's primary, re-routing and retrying on failover until the retry budget ends."""
        end = self.rt.monotonic() + self.retry_budget
        failed_at: float | None = None        # the first failure: retries stay close for a while after it
        delay = retry.FIRST_S
        last: Exception | None = None
        check_routing = self.rt.monotonic() + ROUTING_CHECK_S
        while True:
            busy = False                      # this attempt's answer was the primary's bulkhead: it lives
            if shard not in self.routes:
                try:
                    self.refresh(shard)
                except PSError as e:
                    last = e
            rec = self.routes.get(shard)
            if rec is not None:
                try:
                    return self._call_primary(shard, rec, method, make(rec.epoch), timeout or self.call_timeout)
                except Deposed as e:
                    last, delay = e, retry.FIRST_S         # the record already names the successor: soon
                except grpc.RpcError as e:
                    err = from_rpc_error(e)
                    if not isinstance(err, RETRYABLE) and e.code() != grpc.StatusCode.UNKNOWN:
                        raise err from None
                    last = err
                    busy = is_busy_refusal(e.details())
            if self.rt.monotonic() + delay > end or self.rt.monotonic() >= check_routing:
                check_routing = self.rt.monotonic() + ROUTING_CHECK_S
                self._still_routed(shard)         # a retired shard never answers: re-route instead
            if self.rt.monotonic() + delay > end:
                raise Unavailable(f"shard {shard}: no primary answered {method} within "
                                  f"{self.retry_budget}s; last error: {last}")
            failed_at = self.rt.monotonic() if failed_at is None else failed_at
            self.rt.sleep(delay)
            delay = retry.next_delay(delay, self.rt.monotonic() - failed_at)
            if busy:
                continue                      # a primary that refused for load is still the primary:
                                              # no record read (reads every 25 ms would add to etcd's load)
            try:
                self.refresh(shard)
            except PSError as e:
                last = e

    def _call_primary(self, shard: int, rec: ShardRecord, method: str, req, timeout: float):
        """One call to the primary `rec` names, given up (cancelled) as soon as the shard record
        in etcd names another primary or a later epoch: a frozen primary (SIGSTOP, a hung host)
        keeps its TCP connection up and never answers, and its successor is elected within the
        detector's floor plus an election (~0.2 s), long before the call's deadline (2 s). A slow
        but alive primary (a bandwidth cap on a large push or pull) is never cut: its record does
        not move, so its call runs to the deadline it was given.

        The record is first looked at after the detector's floor (no successor can exist sooner),
        then every DEPOSED_CHECK_S, or BARRIER_CHECK_S for a BSP/SSP barrier pull (a live primary
        holds those for seconds while the barrier waits; a frozen one is still given up, at most
        that much later). The reads are shared by all calls of this client (psnodes/client/record_watch.py:
        at most one read of a shard's record per DEPOSED_CHECK_S however many calls wait). An etcd
        that does not answer is no news: the watch goes on with a backoff until the deadline. A
        reply that arrived while the record was read is returned, not thrown away (the cancel came
        too late). A record that is gone, of a shard the routing record no longer names (a scale-in
        retired it), re-routes: StaleRouting, as `_still_routed` raises for a retired shard."""
        fn = getattr(self.stub(rec.primary), method)
        if not hasattr(fn, "future"):             # the simulator's stub models the same watch itself
            self._watch_elsewhere = True
            return fn(req, timeout=timeout, metadata=self.md)
        fut = fn.future(req, timeout=timeout, metadata=self.md)
        barrier = method == "Pull" and getattr(req, "min_clock", -1) >= 0
        period = BARRIER_CHECK_S if barrier else DEPOSED_CHECK_S
        wait = self.cfg.suspect_floor_s
        while True:
            try:
                return fut.result(timeout=wait)
            except grpc.FutureTimeoutError:
                pass
            wait = period
            look = self.watch.look(shard, period)
            if look is None or look.failed:
                continue                          # no news (etcd away): the deadline still bounds it
            now = look.record
            v = verdict(rec.primary, rec.epoch, now.primary if now else None, now.epoch if now else None,
                        look.routed)
            if v is Watch.WAIT:
                continue
            if not fut.cancel():
                return fut.result()               # the reply came while the record was read: it stands
            if v is Watch.RETIRED:
                raise StaleRouting(f"{STALE_ROUTING}: shard {shard}'s record is gone and routing epoch "
                                   f"{self.routing.epoch} no longer names it (shards {list(self.routing.shards)}); "
                                   f"{method} to {rec.primary} given up, re-route by it")
            cur = self.routes.get(shard)
            if cur is None or now.epoch >= cur.epoch:
                self.routes[shard] = now
            raise Deposed(f"shard {shard}: {rec.primary} (epoch {rec.epoch}) was deposed by "
                          f"{now.primary} (epoch {now.epoch}) during {method}; retried there")

    def _watch_read(self, shard: int) -> tuple[ShardRecord | None, bool | None]:
        """The watch's read of one shard record (serializable: served by the etcd member at hand,
        no quorum round; the record only names successors, so a read a moment old is still news);
        a missing record also reads the routing record, to tell a retired shard (re-route) from one
        about to be written again. Raises PSError when etcd does not answer."""
        self.watch.count()
        kv = self.etcd.get(self.cfg.shard_key(shard), serializable=True)
        if kv is not None:
            return ShardRecord.from_json(kv.value), None
        self.watch.count()
        try:
            r = self.refresh_routing()
        except PSError:
            return None, None
        return None, shard in r.shards

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
        self.events.emit("pull", {**val, "since": sent["since"], "epoch": rep.epoch, "seq": rep.seq, "node": rep.node,
                                  "keys": [t.name for t in rep.dense], "bytes": rep.bytes, **crcs}, "ok", op)
        return arrays, rep.bytes

    def _assemble(self, shard: int, since: int, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """This client's copy of a shard after a pull: a full pull (since 0) is the whole state, a
        delta replaces the tensors it carries. The arrays are the replies' own (read-only), not copies."""
        copy = self.copies[shard] = dict(arrays) if since == 0 else {**self.copies.get(shard, {}), **arrays}
        return copy

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
                req_rows = rows_to_pb(table, ids[m], None, dim)
                futs[s] = (m, self.pool.submit(self.call, s, "Pull", lambda ep, s=s, r=req_rows: ps_pb2.PullRequest(
                    shard=s, epoch=ep, sparse=[r], no_dense=True, min_clock=-1, worker=self.name,
                    routing_epoch=ro.epoch)))
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

    def status(self, node: str, checksum: bool = False, applied: bool = False,
               timeout: float = 2.0, audit: bool = False) -> ps_pb2.StatusReply:
        return self.stub(node).Status(ps_pb2.StatusRequest(checksum=checksum, applied=applied, audit=audit),
                                      timeout=timeout, metadata=self.md)

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        for ch in self._channels:
            ch.close()
