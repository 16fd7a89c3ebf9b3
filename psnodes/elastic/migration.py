"""The migration coordinator: moves keys to a new shard set while training goes on.

`Migrator.run(dst)` takes the cluster from the shard set in the routing record to `dst`:

1. announce: compare-and-swap the routing record to carry the migration (phase copy); the routing
   epoch does not change, so everyone keeps routing as before;
2. copy: for every (from, to) pair, the source primary exports the keys moving to `to` as of a
   replicated seq, and the destination primary imports them through its log (replicated to its
   ISR before the call returns); training goes on, so the keys keep changing on the source;
3. fence: the record's phase becomes fenced, then each source appends a FENCE entry: from then on
   it refuses pushes to its outgoing keys (stale routing), so their values are final;
4. hand-off: each source exports what changed since the copy (and its whole applied set, so a
   retried push is recognised by the new owner), each destination imports it;
5. switch: compare-and-swap the record to routing epoch + 1 over `dst`; every primary is told
   (ROUTE), sources drop the keys they gave away, clients re-route on their next stale answer.

A failed step is retried on whoever is the shard's primary then (a failover in between promotes a
replica that holds every replicated entry, the fence included). Before the switch, a migration
that cannot finish aborts: the record loses the migration by compare-and-swap (so a late switch
cannot land) and the fences are lifted; the old routing stays valid throughout. An abort needs
etcd, so while etcd is silent after the fence the coordinator waits, and the fenced keys stay
unavailable for writes (never acked by two shards). Every phase is an event (`emit`).

The machine is a parameter, as for the PS client (psnodes/runtime.py): clocks and sleep from
`runtime`, the nodes' stubs from `stub_factory`, etcd from `etcd`; the harness's simulator passes
its virtual ones, so a simulated migration runs this very coordinator.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import grpc

from pschaos.psnodes.elastic import routing
from pschaos.psnodes.wire.channels import auth, dial
from pschaos.psnodes.config import ClusterConfig, ShardRecord
from pschaos.psnodes.core import migration as plan
from pschaos.psnodes.core.routing import Routing, aborted, begin, switched, with_phase
from pschaos.psnodes.errors import PSError, from_rpc_error
from pschaos.psnodes.etcd import Etcd, EtcdError
from pschaos.psnodes.proto import ps_pb2, ps_pb2_grpc
from pschaos.psnodes.runtime import REAL, Runtime

Op = ps_pb2.MigrateRequest
Emit = Callable[[str, dict], None]


class MigrationFailed(PSError):
    """The migration aborted (the old routing stands) or could not begin."""


ETCD_WAIT_S = 120.0        # how long a compare-and-swap step waits for a silent etcd before it gives up


def longest_s(etcd_wait_s: float = ETCD_WAIT_S, give_up_s: float = 15.0) -> float:
    """The longest a coordinator can take to end once its steps stall: the switch waiting for etcd,
    then the abort waiting again, then the unfence calls: what a caller joining it must allow."""
    return 2 * etcd_wait_s + 3 * give_up_s


ASYNC_REFUSED = ("replication: async cannot run a live shard migration: a source's promoted replica may not hold "
                 "its FENCE and ack a moving key at the old routing epoch, and a destination primary may die before "
                 "its replicas hold the import, so acknowledged updates are lost; set cluster.replication: sync "
                 "(`pschaos cluster up --mode sync`) to scale shards")


@dataclass
class Outcome:
    id: str
    src: tuple[int, ...]
    dst: tuple[int, ...]
    routing_epoch: int = 0
    switched: bool = False
    aborted: str = ""
    bytes: int = 0                 # state shipped, copy and hand-off
    key_bytes: int = 0             # raw bytes of the moved keys' values and optimizer state (at the copy)
    keys: int = 0
    unavailable_ms: float = 0.0    # fence -> switch
    retired: list[int] = field(default_factory=list)
    imports: list[list] = field(default_factory=list)   # [from, to, part] of each import made (the checker's list)


class Migrator:
    def __init__(self, cfg: ClusterConfig, etcd: Etcd | None = None, emit: Emit | None = None,
                 addresses: dict[str, str] | None = None, hold_s: float = 0.0, give_up_s: float = 15.0,
                 etcd_wait_s: float = ETCD_WAIT_S, *, runtime: Runtime = REAL,
                 stub_factory: Callable[[str], object] | None = None, nonce: str | None = None,
                 fenced_hold_s: float = 0.0) -> None:
        if cfg.mode != "sync":
            raise MigrationFailed(ASYNC_REFUSED)
        if not cfg.peer_token:
            raise MigrationFailed("the migration coordinator needs the cluster config with its peer token "
                                  "(cluster.json, not the client view)")
        self.cfg, self.etcd = cfg, etcd or Etcd(cfg.etcd, timeout=1.0)
        self.emit = emit or (lambda f, v: None)
        self.addresses = addresses or dict(cfg.addresses)
        self.hold_s, self.give_up_s, self.etcd_wait_s = hold_s, give_up_s, etcd_wait_s
        self.fenced_hold_s = fenced_hold_s     # pacing of the hand-off (a large delta), so faults can land in it
        self.rt, self._stub_factory = runtime, stub_factory
        self.nonce = nonce or os.urandom(4).hex()      # the harness passes one drawn from the run's seed
        self.md = auth(cfg.token, cfg.peer_token)
        self._stubs: dict[str, ps_pb2_grpc.ParameterServerStub] = {}
        self._channels: list[grpc.Channel] = []
        self._carried: set[tuple[int, int]] = set()     # pairs whose copy moved keys

    # ------------------------------------------------------------ plumbing
    def _stub(self, node: str):
        if node not in self._stubs and self._stub_factory is not None:
            self._stubs[node] = self._stub_factory(node)
        if node not in self._stubs:
            ch = dial(self.addresses[node], self.cfg.max_message_bytes)
            self._channels.append(ch)
            self._stubs[node] = ps_pb2_grpc.ParameterServerStub(ch)
        return self._stubs[node]

    def close(self) -> None:
        for ch in self._channels:
            ch.close()

    def _call(self, shard: int, req: ps_pb2.MigrateRequest, phase: str) -> ps_pb2.MigrateReply:
        """The step on the shard's primary now, retried on whoever is primary until give_up_s."""
        req.shard = shard
        t0, last = self.rt.monotonic(), ""
        while True:
            try:
                kv = self.etcd.get(self.cfg.shard_key(shard))
                if kv is not None:
                    prim = ShardRecord.from_json(kv.value).primary
                    return self._stub(prim).Migrate(req, timeout=max(self.cfg.rpc_timeout_s, 5.0), metadata=self.md)
                last = f"shard {shard} has no record"
            except grpc.RpcError as e:
                last = str(from_rpc_error(e))
            except EtcdError as e:
                last = str(e)
            step = plan.on_failure(plan.Failure(phase, self.rt.monotonic() - t0, self._etcd_up()), self.give_up_s)
            if step is plan.Step.ABORT or self.rt.monotonic() - t0 > self.etcd_wait_s:
                raise MigrationFailed(f"{phase} on shard {shard} failed for {self.give_up_s}s: {last}")
            self.rt.sleep(0.05)

    def _etcd_up(self) -> bool:
        return self.etcd.healthy()

    def _swap(self, make: Callable[[Routing], Routing | str], what: str) -> Routing:
        """Read the record, make the next one, compare-and-swap; retried across lost races and an
        etcd that does not answer (for up to etcd_wait_s). A swap whose answer was lost may have
        landed all the same (etcd applied it and went down before answering): when the record read
        next is exactly the one sent, it is ours, and the step is done (made again from it, the
        announce would find a migration in progress and the switch none)."""
        t0 = self.rt.monotonic()
        sent: Routing | None = None          # the last swap etcd did not answer
        while True:
            try:
                cur, rev = routing.read(self.etcd, self.cfg)
                if sent is not None and cur == sent:
                    return cur
                new = make(cur)
                if isinstance(new, str):
                    raise MigrationFailed(f"{what}: {new}")
                sent = new
                if routing.swap(self.etcd, self.cfg, rev, new):
                    return new
                sent = None                  # the compare failed: nothing was written
            except EtcdError as e:
                if self.rt.monotonic() - t0 > self.etcd_wait_s:
                    raise MigrationFailed(f"{what}: etcd did not answer for {self.etcd_wait_s}s ({e})") from None
            self.rt.sleep(0.05)

    # --------------------------------------------------------------- steps
    def run(self, dst: list[int] | tuple[int, ...]) -> Outcome:
        """Carry a migration to `dst` through: switched, or aborted (the old routing stands). The
        source set and the routing epoch are the record's that the announce swapped, and the id
        carries this coordinator's nonce, so two coordinators never share one."""
        cur, rev = routing.read(self.etcd, self.cfg)
        mid = f"{cur.epoch}.{rev}.{self.nonce}"
        dst = tuple(sorted(set(dst)))
        rec = self._swap(lambda r: begin(r, mid, dst), "announce")
        src = tuple(rec.migration.src) if rec.migration is not None and rec.migration.id == mid else rec.shards
        out = Outcome(mid, src, dst, routing_epoch=rec.epoch)
        self.emit("migration-start", {"migration": mid, "src": list(src), "dst": list(dst),
                                      "routing_epoch": rec.epoch})
        phase = "copy"
        try:
            base = self._copy(out)
            phase = "fence"
            t_fence = self._fence(out)
            if self.fenced_hold_s:
                self.rt.sleep(self.fenced_hold_s)
            phase = "delta"
            self._handoff(out, base)
            phase = "switch"
            new = self._swap(lambda r: switched(r, mid), "switch")
        except BaseException as e:  # noqa: BLE001 - any failure before the switch, Ctrl-C too, aborts
            why = str(e) if isinstance(e, MigrationFailed) else f"{e.__class__.__name__}: {e}"
            try:
                self._abort(out, phase, why)
            except BaseException as e2:  # noqa: BLE001 - recorded, then the original failure goes on
                self.emit("migration-stuck", {"migration": mid, "phase": phase, "reason": f"{why}; abort: {e2}"})
                if isinstance(e, MigrationFailed):
                    raise e2 from e
            if isinstance(e, MigrationFailed):
                return out
            raise
        out.switched, out.routing_epoch = True, new.epoch
        out.unavailable_ms = round((self.rt.monotonic() - t_fence) * 1000, 2)
        # the imports it made: handoff-continuity expects a digest-carrying record of each
        self.emit("migration-switch", {"migration": mid, "routing_epoch": new.epoch, "shards": list(new.shards),
                                       "fenced_ms": out.unavailable_ms, "imports": out.imports})
        self._route(out, new)
        out.retired = plan.retired(src, dst)
        self.emit("migration-done", {"migration": mid, "routing_epoch": new.epoch, "bytes": out.bytes,
                                     "key_bytes": out.key_bytes, "keys": out.keys, "retired": out.retired})
        return out

    def abort_in_progress(self) -> str | None:
        """Abort the migration the routing record holds (its coordinator died or was stopped): the
        record loses it by compare-and-swap, every fence is lifted and what destinations imported is
        dropped; the old routing stands. Returns its id, None when the record holds none. Safe
        against a coordinator still running: its next compare-and-swap fails and it aborts too."""
        cur, _ = routing.read(self.etcd, self.cfg)
        m = cur.migration
        if m is None:
            return None
        out = Outcome(m.id, tuple(m.src), tuple(m.dst), routing_epoch=cur.epoch)
        self._abort(out, m.phase, "aborted by a later coordinator (the record held it)")
        return m.id

    def _move(self, a: int, b: int, part: str, since: tuple[int, int], mid: str, out: Outcome) -> tuple[int, int]:
        """Export the keys moving a -> b (changed after `since`), import them at b; the export's seq."""
        exp = self._call(a, Op(op=Op.EXPORT, migration=mid, src=out.src, dst=out.dst, to=b, part=part,
                               since_seq=since[0], since_epoch=since[1]), part)
        if part == "copy" and exp.keys:
            self._carried.add((a, b))
        if exp.keys or (a, b) in self._carried:     # the hand-off also carries the source's applied set
            self._call(b, Op(op=Op.IMPORT, migration=mid, state=exp.state, part=part, from_shard=a), part)
            out.imports.append([a, b, part])
            out.bytes += len(exp.state)
            out.keys += exp.keys if part == "copy" or exp.full else 0
            if part == "copy" or exp.full:
                out.key_bytes += exp.key_bytes
        return exp.seq, exp.seq_epoch

    def _copy(self, out: Outcome) -> dict[tuple[int, int], tuple[int, int]]:
        t0 = self.rt.monotonic()
        self.emit("migration-copy-start", {"migration": out.id, "pairs": plan.pairs(out.src, out.dst)})
        base = {}
        for a, b in plan.pairs(out.src, out.dst):
            base[(a, b)] = self._move(a, b, "copy", (0, 0), out.id, out)
        if self.hold_s:
            self.rt.sleep(self.hold_s)         # pacing: a large copy takes this long; training goes on
        self.emit("migration-copy-end", {"migration": out.id, "bytes": out.bytes, "key_bytes": out.key_bytes,
                                         "keys": out.keys, "took_ms": round((self.rt.monotonic() - t0) * 1000, 2)})
        return base

    def _fence(self, out: Outcome) -> float:
        self._swap(lambda r: with_phase(r, out.id, "fenced"), "fence")
        t = self.rt.monotonic()
        self.emit("migration-fence", {"migration": out.id, "routing_epoch": out.routing_epoch,
                                      "sources": plan.sources(out.src, out.dst)})
        for a in plan.sources(out.src, out.dst):
            self._call(a, Op(op=Op.FENCE, migration=out.id, src=out.src, dst=out.dst), "fence")
        return t

    def _handoff(self, out: Outcome, base: dict) -> None:
        before = out.bytes
        for (a, b), since in base.items():
            self._move(a, b, "delta", since, out.id, out)
        self.emit("migration-handoff", {"migration": out.id, "bytes": out.bytes - before})

    def _route(self, out: Outcome, new: Routing) -> None:
        """Tell every primary of the new routing (each adopts it through its log; the sources drop
        the keys they gave away). Best effort: a node that misses it adopts it on the first call
        routed by the new epoch."""
        for s in sorted(set(out.src) | set(out.dst)):
            try:
                self._call(s, Op(op=Op.ROUTE, migration=out.id, dst=new.shards, routing_epoch=new.epoch), "route")
            except MigrationFailed as e:
                self.emit("migration-route-missed", {"migration": out.id, "shard": s, "error": str(e)})

    def _abort(self, out: Outcome, phase: str, why: str) -> None:
        """Before the switch: take the migration out of the record (a late switch then fails its
        compare-and-swap), then lift every fence and drop what destinations imported."""
        self._swap(lambda r: aborted(r, out.id), "abort")
        out.aborted = why
        for s in sorted(set(out.src) | set(out.dst)):
            try:
                self._call(s, Op(op=Op.UNFENCE, migration=out.id), "unfence")
            except MigrationFailed as e:
                self.emit("migration-unfence-missed", {"migration": out.id, "shard": s, "error": str(e)})
        self.emit("migration-abort", {"migration": out.id, "phase": phase, "reason": why,
                                      "routing_epoch": out.routing_epoch})
