"""How a PS client's call reaches a shard's primary: the routing record it places keys by, the
shard records it routes by, stubs, the retry loop and the deposed-primary watch.

A call retries through failovers until its retry budget ends: it re-reads the shard record after
each failure (the same request goes to the new primary, so a retried push keeps its idempotency
key), re-routes when the routing record no longer names the shard, and gives up a call to a
primary the record shows deposed (a frozen primary never answers). PSClient (client.py) builds
its pushes and pulls on this; it stands apart so that the way to a primary is read in one place.
"""
from __future__ import annotations

from typing import Callable

import grpc

from pschaos.psnodes.wire.bulkhead import is_busy_refusal
from pschaos.psnodes.wire.channels import auth, dial
from pschaos.psnodes.config import ClusterConfig, ShardRecord, etcd_url
from pschaos.psnodes.elastic import routing
from pschaos.psnodes.core import retry
from pschaos.psnodes.core.deposed import Watch, verdict
from pschaos.psnodes.core.routing import Routing, static
from pschaos.psnodes.errors import RETRYABLE, STALE_ROUTING, PSError, StaleRouting, from_rpc_error
from pschaos.psnodes.etcd import Etcd
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc
from pschaos.psnodes.client.record_watch import RecordWatch
from pschaos.psnodes.runtime import Runtime


ROUTING_CHECK_S = 1.0      # while a shard does not answer, re-read the routing record this often
DEPOSED_CHECK_S = 0.05     # a call in flight looks at its shard record this often (see _call_primary)
BARRIER_CHECK_S = 0.2      # ... a BSP/SSP barrier pull (held by a live primary for seconds) this often


class Deposed(PSError):
    """The shard record named a new primary while a call to the old one was in flight."""

    code = grpc.StatusCode.UNAVAILABLE


class Unavailable(PSError):
    """A shard did not answer within the retry budget (outcome of a push unknown)."""

    code = grpc.StatusCode.UNAVAILABLE


class ShardCalls:
    """The base of PSClient: the routing, the shard records, and one call to a shard's primary,
    retried through failovers (`call`)."""

    def __init__(self, cfg: ClusterConfig, name: str, links: dict[str, str] | None, call_timeout: float | None,
                 retry_budget: float, runtime: Runtime, etcd, stub_factory: Callable[[str], object] | None) -> None:
        """PSClient's arguments of the same names (`runtime`, `etcd` and `stub_factory`: the machine)."""
        self.cfg, self.name = cfg, name
        self.rt = runtime
        self._stub_factory = stub_factory
        self.links = links or dict(cfg.addresses)
        self.etcd = etcd if etcd is not None else Etcd(etcd_url(cfg, self.links), timeout=0.5)
        self.md = auth(cfg.token)
        self.call_timeout = call_timeout or cfg.rpc_timeout_s
        self.retry_budget = retry_budget
        self.routes: dict[int, ShardRecord] = {}
        #: the routing record (psnodes/elastic/routing.py): which shards own keys; re-read on StaleRouting
        self.routing: Routing = static(cfg.shards)
        self._stubs: dict[str, ps_pb2_grpc.ParameterServerStub] = {}
        self._channels: list[grpc.Channel] = []
        self.pool = runtime.pool(max(1, cfg.shards, cfg.max_shards), "ps-client")
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

    def status(self, node: str, checksum: bool = False, applied: bool = False,
               timeout: float = 2.0, audit: bool = False,
               holdings: list[int] | None = None) -> ps_pb2.StatusReply:
        """A copy's Status; `holdings` asks for its key set sorted by owner under that shard set
        ([] for the copy's own routing; pschaos.psnodes.store.holdings)."""
        req = ps_pb2.StatusRequest(checksum=checksum, applied=applied, audit=audit,
                                   holdings=holdings is not None, holdings_under=holdings or [])
        return self.stub(node).Status(req, timeout=timeout, metadata=self.md)

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        for ch in self._channels:
            ch.close()
