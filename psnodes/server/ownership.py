"""A shard node's side of elastic shards: routing epochs on every call, and the Migrate RPC.

Ownership is the store's replicated state (psnodes/store/moving.py); this module is the node's shell
around it. A push or pull names the routing epoch its client placed keys by: older than the
store's is refused as stale (StaleRouting, ABORTED: the client re-reads the record and
re-routes); newer makes the primary read the record from etcd and adopt it through its own log
(a ROUTE entry, replicated like any update) before it serves. Under the lock every key of the
call must be owned by this shard at that epoch and not fenced (moving out): a fenced key is
refused as stale routing too, so a source never acks a key once its hand-off began.

The Migrate RPC carries out the coordinator's steps (EXPORT, IMPORT, FENCE, UNFENCE, ROUTE) on
the primary; every step that changes state is an entry of the shard's own log, applied and
replicated (sync mode: acked by the ISR) before the call returns, so a failover keeps it.

Two shells run this: the real node (psnodes/server/node.py: its lock, waits and etcd client) and the
SimPy twin (harness/backends/sim/copy/migrate.py). The checks (`check_call`, `check_push`, `check_pull`:
any copy with `store`, `name` and `shard`) and the decisions of a Migrate step (`plan_migrate`,
`route_step`, `adoption`, `check_export`, `export_now`, `export_reply`, and `restore_routing`, what a
copy that restored its shard appends before it serves) hold no lock, clock or I/O, so both shells decide alike; `sync_routing`, `adopt`, `append` and `migrate` are the real
node's shell around them.

A copy is typed by what is read of it (pschaos.psnodes.server.shells: ShardCopy for the checks,
PrimaryShell for the real node's shell), so this module imports neither shell.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, NamedTuple

import numpy as np

from pschaos.psnodes.store import moving
from pschaos.psnodes.elastic import routing
from pschaos.psnodes.wire.codec import ids_from_pb
from pschaos.psnodes.core.routing import Epochs, Restored, Routing, after_restore, compare
from pschaos.psnodes.errors import STALE_ROUTING, InvalidArgument, NotPrimary, StaleRouting
from pschaos.psnodes.proto import ps_pb2
from pschaos.psnodes.server.shells import PrimaryShell, ShardCopy

if TYPE_CHECKING:
    from pschaos.psnodes.store.store import ShardStore

Op = ps_pb2.MigrateRequest


def _always() -> bool:
    return True


def sync_routing(node: PrimaryShell, caller_epoch: int, deadline: float, active: Callable[[], bool] = _always) -> None:
    """A caller ahead of this shard's routing epoch: read the record and adopt it (primary only).
    `active` (grpc's context.is_active): the adoption's ack wait ends once the caller gave up."""
    if caller_epoch <= node.store.routing_epoch or node.etcd is None:
        return
    try:
        rec, _ = routing.read(node.etcd, node.cfg)
    except Exception as e:  # noqa: BLE001 - no etcd, no proof of the newer routing
        raise unreadable(node.name, caller_epoch, node.store.routing_epoch, e) from None
    rec = adoption(node.name, caller_epoch, rec)
    adopt(node, rec.epoch, rec.shards, deadline, active)


def adopt(node: PrimaryShell, epoch: int, shards, deadline: float, active: Callable[[], bool] = _always) -> int:
    """Append a ROUTE entry for `epoch` (nothing when the store is there already)."""
    if epoch <= node.store.routing_epoch:
        return node.store.seq
    step = route_step(epoch, shards)
    return append(node, step.update, deadline, lambda: step.still(node.store), active)


def append(node: PrimaryShell, upd: ps_pb2.Update, deadline: float, still=lambda: True,
           active: Callable[[], bool] = _always) -> int:
    """Apply one of the shard's own entries as primary and wait until the mode's ack rule holds."""
    with node.cond:
        node._check_primary(0)
        epoch = node.epoch
        if still():
            dec = node.store.validate(upd)
            seq = node.store.apply(dec, upd.SerializeToString(), epoch)
            node.peer_seq[node.name] = seq
            node.metrics.seq.set(seq)
            node.cond.notify_all()
        seq = node.store.seq
        if node.cfg.mode == "sync":
            node._wait_replicated(seq, epoch, deadline, active)
        else:
            node._wait_followers(epoch, deadline, active)
        return seq


def check_call(node: ShardCopy, caller_epoch: int) -> None:
    """The caller's routing epoch against ours (lock held)."""
    verdict = compare(caller_epoch, node.store.routing_epoch)
    if verdict is Epochs.STALE:
        raise StaleRouting(f"{STALE_ROUTING}: {node.name} is at routing epoch {node.store.routing_epoch}, the "
                           f"call was routed by {caller_epoch}; re-read the routing record and re-route")
    if verdict is Epochs.AHEAD:
        raise NotPrimary(f"{node.name}: routing epoch {caller_epoch} arrived while this shard adopts it; retry")


def check_push(node: ShardCopy, caller_epoch: int, upd: ps_pb2.Update) -> None:
    """Every key of a push owned here at the caller's routing epoch, none fenced (lock held)."""
    check_call(node, caller_epoch)
    store = node.store
    names = [t.name for t in upd.dense]
    for n in names:
        if not moving.owns(store, n):
            raise StaleRouting(f"{STALE_ROUTING}: {n[:80]!r} belongs to shard {moving.owner_of(store, n)} at routing "
                               f"epoch {store.routing_epoch}, not {node.shard}; re-route")
    fenced = moving.fenced_names(store, names)
    if fenced:
        raise StaleRouting(f"{STALE_ROUTING}: {fenced[0][:80]!r} is moving off shard {node.shard} (migration "
                           f"{store.fence['migration']}); re-read the routing record and retry")
    for r in upd.sparse:
        if r.table in store.tables:
            ids = np.frombuffer(r.ids, dtype="<i8") if len(r.ids) % 8 == 0 else np.zeros(0, np.int64)
            if ids.size and (not moving.rows_owned(store, r.table, ids).all() or moving.fenced_rows(store, r.table, ids)):
                raise StaleRouting(f"{STALE_ROUTING}: rows of {r.table!r} are not owned by shard {node.shard} at "
                                   f"routing epoch {store.routing_epoch} or are moving; re-route")


def check_pull(node: ShardCopy, req: ps_pb2.PullRequest) -> None:
    """A pull's routing epoch, and that every row it asks for is owned here (lock held)."""
    check_call(node, req.routing_epoch)
    for r in req.sparse:
        if r.table in node.store.tables:
            ids = ids_from_pb(r, limits=node.store.spec.limits)
            if ids.size and not moving.rows_owned(node.store, r.table, ids).all():
                raise StaleRouting(f"{STALE_ROUTING}: rows of {r.table!r} asked of shard {node.shard} belong "
                                   f"elsewhere at routing epoch {node.store.routing_epoch}; re-route")


# ------------------------------------------- decisions both shells take (no lock, clock or I/O)
# psnodes/server/node.py (gRPC and threads) and the SimPy twin (harness/backends/sim/copy/migrate.py) each hold
# their own lock and waits around these, so a Migrate step decides the same on both.
def unreadable(name: str, caller_epoch: int, ours: int, err: Exception) -> NotPrimary:
    """The refusal of a call routed by a newer epoch while the record could not be read."""
    return NotPrimary(f"{name}: the caller routes by routing epoch {caller_epoch}, this shard knows {ours}, and "
                      f"etcd could not be read ({err}); retry")


def adoption(name: str, caller_epoch: int, rec: Routing) -> Routing:
    """The record read for a caller ahead of us: adopt it, unless etcd does not hold that epoch yet."""
    if rec.epoch < caller_epoch:
        raise NotPrimary(f"{name}: routing epoch {caller_epoch} is not in etcd (it holds {rec.epoch}); retry")
    return rec


@dataclass(frozen=True)
class Step:
    """What one Migrate call does: EXPORT (`export`), adopt a routing (`route`: epoch and shards,
    nothing appended when the store is there already), or append `update` to the shard's log while
    `still(store)` holds, checked under the lock (a retried step appends nothing twice), and emit
    `event` once it is replicated."""

    export: bool = False
    route: tuple[int, tuple[int, ...]] | None = None
    update: ps_pb2.Update | None = None
    still: Callable[["ShardStore"], bool] = lambda store: True
    event: str = ""


def fence_update(mid: str, src, dst) -> ps_pb2.Update:
    meta = json.dumps({"migration": mid, "src": sorted(int(a) for a in src), "dst": sorted(int(b) for b in dst)})
    return ps_pb2.Update(kind=ps_pb2.Update.FENCE, meta=meta.encode())


def unfence_update(mid: str) -> ps_pb2.Update:
    return ps_pb2.Update(kind=ps_pb2.Update.UNFENCE, meta=json.dumps({"migration": mid}).encode())


def restore_routing(store: "ShardStore", rec: Routing, epoch: int) -> list[tuple[str, dict]]:
    """A copy won the restore of its shard (every ISR copy lost) at primary epoch `epoch`, with the
    routing record `rec` its compare-and-swap compared: before it serves, append what the record
    says its restored state lacks (pschaos.psnodes.core.routing.after_restore: a ROUTE to the record's epoch,
    a FENCE of a fenced migration it is a source of, an UNFENCE of one the record no longer holds).
    The copy is alone in its ISR and not primary yet, so the entries are applied here, in both
    shells (lock held), at `epoch`. Returns the events to emit: `restore-routing`, and the
    `migrate-fenced` fence point `single-owner` judges the copy's acks against."""
    me = store.spec.shard
    r = after_restore(me, store.routing_epoch, (store.fence or {}).get("migration"), rec)
    fence_seq = 0
    for upd in [*([unfence_update(r.unfence)] if r.unfence else []),
                *([route_step(*r.route).update] if r.route else []),
                *([fence_update(r.fence.id, r.fence.src, r.fence.dst)] if r.fence else [])]:
        seq = store.apply(store.validate(upd), upd.SerializeToString(), epoch)
        fence_seq = seq if upd.kind == ps_pb2.Update.FENCE else fence_seq
    if r == Restored():
        return []
    out = [("restore-routing", {"shard": me, "epoch": epoch, "routing_epoch": store.routing_epoch,
                                "shards": list(store.shards), "record_epoch": rec.epoch, "unfenced": r.unfence,
                                "fenced": r.fence.id if r.fence else None, "seq": store.seq})]
    if r.fence:
        out.append(("migrate-fenced", {"shard": me, "migration": r.fence.id, "seq": fence_seq, "epoch": epoch}))
    return out


def route_step(epoch: int, shards) -> Step:
    meta = json.dumps({"migration": "", "epoch": int(epoch), "shards": sorted(int(s) for s in shards)})
    return Step(update=ps_pb2.Update(kind=ps_pb2.Update.ROUTE, meta=meta.encode()),
                still=lambda store: epoch > store.routing_epoch)


def plan_migrate(req: ps_pb2.MigrateRequest) -> Step:
    """A Migrate request checked, and the step it asks for (the shard is the shell's check)."""
    if not req.migration and req.op != Op.ROUTE:
        raise InvalidArgument("Migrate: migration is empty; every step names its migration id")
    src, dst = sorted(req.src), sorted(req.dst)
    if req.op in (Op.EXPORT, Op.FENCE) and (not src or not dst):
        raise InvalidArgument("Migrate: src and dst must both name the shard sets keys move between")
    if req.op == Op.EXPORT:
        return Step(export=True)
    if req.op == Op.IMPORT:
        marker = f"{req.migration}/{req.part}/{req.from_shard}"
        return Step(update=ps_pb2.Update(kind=ps_pb2.Update.MIGRATE, meta=req.state),
                    still=lambda store: marker not in store.imported, event="migrate-imported")
    if req.op == Op.FENCE:
        return Step(update=fence_update(req.migration, src, dst),
                    still=lambda store: (store.fence or {}).get("migration") != req.migration, event="migrate-fenced")
    if req.op == Op.UNFENCE:
        return Step(update=unfence_update(req.migration))
    if req.op == Op.ROUTE:
        if not dst:
            raise InvalidArgument("Migrate ROUTE: dst must name the shards of the routing epoch")
        return Step(route=(int(req.routing_epoch), tuple(dst)))
    raise InvalidArgument(f"Migrate: op={req.op} is unknown")


def step_event(shard: int, req: ps_pb2.MigrateRequest, seq: int, epoch: int, store: "ShardStore | None" = None) -> dict:
    """A step's event (the fence point `single-owner` judges acks against): the seq at which the
    entry is on the ISR and the primary epoch it was applied in; every later primary holds it there.
    An IMPORT's also says whether the keys it carried hold here the state the source exported
    (moving.import_record; read under the node's lock)."""
    ev = {"shard": shard, "migration": req.migration, "seq": seq, "epoch": epoch}
    if req.op == Op.IMPORT and store is not None:
        ev.update(moving.import_record(store, req.state))
    return ev


def step_reply(store: "ShardStore", seq: int, name: str) -> ps_pb2.MigrateReply:
    return ps_pb2.MigrateReply(seq=seq, seq_epoch=store.seq_epoch, routing_epoch=store.routing_epoch, node=name)


def check_export(store: "ShardStore", req: ps_pb2.MigrateRequest, name: str) -> None:
    """A delta is exported only from a source fenced for the migration (its values are final)."""
    if req.part == "delta" and (store.fence or {}).get("migration") != req.migration:
        raise InvalidArgument(f"Migrate EXPORT delta: {name} is not fenced for migration {req.migration}; "
                              "fence it first")


class Exported(NamedTuple):
    blob: bytes
    key_bytes: int
    keys: int
    full: bool
    seq: int
    seq_epoch: int
    routing_epoch: int


def export_now(store: "ShardStore", req: ps_pb2.MigrateRequest) -> Exported:
    """The keys moving to `req.to`, as of the store now (the shell then waits until that is replicated):
    changed since the copy's (seq, epoch) when this history still holds it, else all of them."""
    since = int(req.since_seq)
    full = since == 0 or not store.matches(since, int(req.since_epoch)) or since < store.shape_seq
    blob, key_bytes, keys = moving.export_keys(store, req.to, sorted(req.src), sorted(req.dst), 0 if full else since)
    return Exported(blob, key_bytes, keys, full, store.seq, store.seq_epoch, store.routing_epoch)


def export_reply(x: Exported, req: ps_pb2.MigrateRequest, name: str) -> ps_pb2.MigrateReply:
    """The export's reply, the migration id and part added to its state (they go in the entry the
    destination logs); built outside the lock."""
    from pschaos.psnodes.store.blob import pack, unpack

    meta, arrays = unpack(x.blob)
    blob = pack({**meta, "migration": req.migration, "part": req.part or "copy"}, arrays)
    return ps_pb2.MigrateReply(seq=x.seq, seq_epoch=x.seq_epoch, state=blob, key_bytes=x.key_bytes, keys=x.keys,
                               full=x.full, routing_epoch=x.routing_epoch, node=name)


# ---------------------------------------------------------------- Migrate RPC (the real node's shell)
def migrate(node: PrimaryShell, req: ps_pb2.MigrateRequest, deadline: float,
            active: Callable[[], bool] = _always) -> ps_pb2.MigrateReply:
    """One Migrate step; its waits end once the coordinator gave the call up (`active`)."""
    node._check_shard(req.shard, "Migrate")
    step = plan_migrate(req)
    if step.export:
        return _export(node, req, deadline, active)
    if step.route is not None:
        seq = adopt(node, *step.route, deadline, active)
    else:
        seq = append(node, step.update, deadline, lambda: step.still(node.store), active)
        if step.event:
            with node.cond:
                ev = step_event(node.shard, req, seq, node.epoch, node.store)
            node.events.emit(step.event, ev)
    return step_reply(node.store, seq, node.name)


def _export(node: PrimaryShell, req, deadline: float, active: Callable[[], bool] = _always) -> ps_pb2.MigrateReply:
    """The moving keys as of a replicated seq: in sync mode only what every ISR copy holds is
    exported, so a failover of the source never takes back a value the destination already has."""
    with node.cond:
        node._check_primary(0)
        epoch = node.epoch
        check_export(node.store, req, node.name)
        x = export_now(node.store, req)
        if node.cfg.mode == "sync":
            # a read index, as a pull's: exported at x.seq under the lock, answered once every
            # in-sync copy holds it (waiting first and exporting after let entries applied
            # during the wait into the export unreplicated)
            node._wait_replicated(x.seq, epoch, deadline, active)
    return export_reply(x, req, node.name)
