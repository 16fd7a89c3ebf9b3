"""A tiny simulated PS client and a one-shard cluster to push to, for the twin's first tests.

The client does what psnodes/client/client.py does for one dense tensor on one shard: INIT (set-if-
absent) of the tensor and the shard's audit tensor, then pushes, each with the worker's audit +1;
a push goes to the primary the shard record names, and on a retryable failure the client waits
(pschaos.psnodes.core.retry's schedule, as pschaos.psnodes.client.shard_calls), re-reads the record and sends the *same* idempotency key again, until
its retry budget ends. Every push is an invoke/ok/fail/info operation in the history, with
client.py's fields.
"""
from __future__ import annotations

import itertools
import random
from typing import TYPE_CHECKING, Callable

import numpy as np
import simpy

from pschaos.psnodes.core import retry
from pschaos.psnodes.wire.codec import tensor_to_pb
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.errors import RETRYABLE, PSError
from pschaos.psnodes.placement import AUDIT_SLOTS, audit_name
from pschaos.psnodes.proto import ps_pb2

from pschaos.harness.backends.sim.clock import SimClock
from pschaos.harness.backends.sim.copy.copy import SimCopy
from pschaos.harness.backends.sim.copy.procs import CopyProcs
from pschaos.harness.backends.sim.etcd import SimEtcd
from pschaos.harness.backends.sim.network import SimNetwork
from pschaos.harness.backends.sim.rpc import Gen, SimHistory, SimRpcError, call, etcd_call

if TYPE_CHECKING:
    from pschaos.harness.backends.sim.cpu import SimCPU

REPLY_BYTES = 48


class SimPushClient:
    def __init__(self, env: simpy.Environment, clock: SimClock, etcd: SimEtcd, net: SimNetwork,
                 cfg: ClusterConfig, copies: dict[str, SimCopy], history: SimHistory, rng: random.Random,
                 name: str = "worker-0", incarnation: int = 1, shard: int = 0, tensor: str = "w", size: int = 4,
                 retry_budget: float = 20.0) -> None:
        self.env, self.clock, self.etcd, self.net, self.cfg = env, clock, etcd, net, cfg
        self.copies, self.history, self.rng = copies, history, rng
        self.name, self.incarnation, self.shard, self.tensor, self.size = name, incarnation, shard, tensor, size
        self.retry_budget = retry_budget
        self.audit_slot = int(name.split("-")[1])
        self.route: ShardRecord | None = None
        self._req_ids = itertools.count(1)
        self._ops = itertools.count(1)

    def refresh(self) -> Gen:
        kv = yield from etcd_call(self.net, self.env, self.name, lambda: self.etcd.get(self.cfg.shard_key(self.shard)),
                                  server=self.etcd)
        if kv is not None:
            self.route = ShardRecord.from_json(kv.value)

    def call(self, make: Callable[[int], ps_pb2.PushRequest]) -> Gen:
        """client.py's call: to the routed primary, re-routing and retrying until the budget ends."""
        end = self.env.now + self.retry_budget
        failed_at: float | None = None
        delay = retry.FIRST_S
        last: Exception | None = None
        while True:
            if self.route is None:
                try:
                    yield from self.refresh()
                except PSError as e:
                    last = e
            rec = self.route
            if rec is not None:
                req = make(rec.epoch)
                dst = self.copies[rec.primary]
                deadline = self.env.now + self.cfg.rpc_timeout_s
                try:
                    return (yield from call(self.net, self.name, rec.primary, lambda: dst.alive,
                                            lambda: dst.push(req, deadline - 0.02, self.name), req.ByteSize(),
                                            lambda _r: REPLY_BYTES, deadline))
                except (SimRpcError, *RETRYABLE) as e:
                    last = e
            if self.env.now + delay > end:
                raise SimRpcError("UNAVAILABLE", f"shard {self.shard}: no primary answered within "
                                                 f"{self.retry_budget}s; last error: {last}")
            failed_at = self.env.now if failed_at is None else failed_at
            yield from self.clock.sleep(delay)
            delay = retry.next_delay(delay, self.env.now - failed_at)
            try:
                yield from self.refresh()
            except PSError as e:
                last = e

    def init(self) -> Gen:
        upd = ps_pb2.Update(kind=ps_pb2.Update.INIT, dense=[
            tensor_to_pb(audit_name(self.shard), np.zeros(AUDIT_SLOTS, np.float32)),
            tensor_to_pb(self.tensor, np.zeros(self.size, np.float32))])
        yield from self.call(lambda ep: ps_pb2.PushRequest(shard=self.shard, epoch=ep, update=upd))

    def push(self, step: int) -> Gen:
        """One push of a small dense gradient (drawn from the run's generator) plus the audit +1."""
        grad = np.array([self.rng.uniform(-1, 1) for _ in range(self.size)], np.float32)
        audit = np.zeros(AUDIT_SLOTS, np.float32)
        audit[self.audit_slot] = -1.0
        upd = ps_pb2.Update(worker=self.name, incarnation=self.incarnation, clock=step, req_id=next(self._req_ids),
                            dense=[tensor_to_pb(self.tensor, grad), tensor_to_pb(audit_name(self.shard), audit)])
        op = f"{self.name}:{next(self._ops)}"
        val = {"worker": self.name, "incarnation": upd.incarnation, "req_id": upd.req_id, "shard": self.shard,
               "clock": upd.clock, "keys": [t.name for t in upd.dense]}
        self.history.record("push", val, "invoke", self.name, op)
        req = ps_pb2.PushRequest(shard=self.shard, update=upd)

        def make(ep: int) -> ps_pb2.PushRequest:
            req.epoch = ep
            return req
        try:
            rep = yield from self.call(make)
        except PSError as e:
            definite = not isinstance(e, SimRpcError)
            self.history.record("push", {**val, "error": str(e)}, "fail" if definite else "info", self.name, op)
            return None
        self.history.record("push", {**val, "epoch": rep.epoch, "seq": rep.seq, "node": rep.node,
                                     "duplicate": rep.duplicate}, "ok", self.name, op)
        return rep

    def run(self, until: float, think_s: float = 0.02) -> Gen:
        """INIT, then push one step after another (a think time apart) until `until`."""
        yield from self.init()
        for step in itertools.count():
            if self.env.now >= until:
                return
            yield from self.push(step)
            yield from self.clock.sleep(think_s)


class SimShardCluster:
    """One shard's copies on one Environment, one seeded generator, one etcd and one network."""

    def __init__(self, seed: int, cfg: ClusterConfig | None = None, shard: int = 0) -> None:
        self.env = simpy.Environment()
        self.rng = random.Random(seed)
        self.clock = SimClock(self.env)
        self.etcd = SimEtcd(self.env)
        self.net = SimNetwork(self.env, self.rng)
        self.cfg = cfg or ClusterConfig(cluster_id="sim", etcd="sim://etcd", shards=1, copies=3, workers=1,
                                        mode="sync", seed=seed)
        self.history = SimHistory(self.clock)
        self.copies = {n: SimCopy(self.env, self.clock, self.etcd, self.net, self.cfg, n, self.history)
                       for n in self.cfg.shard_nodes(shard)}
        self.procs = {n: CopyProcs(c, self.copies) for n, c in self.copies.items()}
        for p in self.procs.values():
            p.start()

    def client(self, name: str = "worker-0") -> SimPushClient:
        return SimPushClient(self.env, self.clock, self.etcd, self.net, self.cfg, self.copies, self.history,
                             self.rng, name=name)

    def attach_cpu(self, cores: float) -> "SimCPU":
        """Give every copy one host's `cores` (harness/backends/sim/cpu.py), as SimBackend does; returns it."""
        from pschaos.harness.backends.sim.cpu import SimCPU

        cpu = SimCPU(self.env, cores)
        for c in self.copies.values():
            c.cpu = cpu
        return cpu

    def kill_at(self, name: str, t: float) -> None:
        def go() -> Gen:
            yield from self.clock.sleep(t - self.env.now)
            self.copies[name].kill()
            self.history.record("kill", {"target": name})
        self.env.process(go())

    def primary(self) -> SimCopy | None:
        live = [c for c in self.copies.values() if c.alive and c.role == "primary"]
        return max(live, key=lambda c: c.epoch) if live else None

    def final_states(self) -> list[dict]:
        """Record and return each copy's final-state event value, as the runner's _observe does."""
        out = [c.final_state() for c in self.copies.values()]
        for v in out:
            self.history.record("final-state", v, node=v["node"])
        return out


__all__ = ["SimPushClient", "SimShardCluster"]
