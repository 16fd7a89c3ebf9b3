"""Small builders of history events for checker tests (the shapes DESIGN.md's contract names)."""
from __future__ import annotations


def ev(t, f, value, type_="info", node="n", op=None):
    e = {"t": t, "node": node, "type": type_, "f": f, "value": value}
    if op is not None:
        e["op_id"] = op
    return e


def push(value, audit=True):
    """A push's value; its keys carry the shard's audit increment, as every worker's do."""
    v = {"worker": "worker-0", "incarnation": 1, "keys": ["w"], "clock": -1, **value}
    if audit:
        v["keys"] = [*v["keys"], f"__audit__/{v['shard']}"]
    return v


def inv(t, worker, req, shard, op=None, inc=1, keys=("w",)):
    return ev(t, "push", push({"worker": worker, "req_id": req, "shard": shard, "incarnation": inc,
                               "keys": list(keys)}), "invoke", worker, op)


def ok(t, worker, req, shard, epoch, seq, node="shard-0/0", dup=False, inc=1, op=None, keys=("w",)):
    return ev(t, "push", push({"worker": worker, "req_id": req, "shard": shard, "epoch": epoch, "seq": seq,
                               "node": node, "duplicate": dup, "incarnation": inc, "keys": list(keys)}),
              "ok", worker, op)


def acked(t0, t1, worker, req, shard, epoch, seq, node="shard-0/0", inc=1, keys=("w",)):
    """An invoke at t0 and its ok at t1, paired by op id."""
    op = f"{worker}:{inc}:{shard}:{req}:{t0}"
    return [inv(t0, worker, req, shard, op, inc, keys), ok(t1, worker, req, shard, epoch, seq, node, inc=inc,
                                                           op=op, keys=keys)]


def final(node, shard, role, epoch, seq, applied, pushes=None, checksum="c", audit="auto", alive=True):
    """A copy's final state; `audit` defaults to the count its applied set implies (an honest PS)."""
    n = sum(hi - lo + 1 for rs in applied.values() for lo, hi in rs)
    if audit == "auto":
        audit = {}
        for k, rs in applied.items():
            w = k.split("#")[0]
            audit[w] = audit.get(w, 0) + sum(hi - lo + 1 for lo, hi in rs)
    v = {"node": node, "shard": shard, "alive": alive}
    if alive:
        v.update(role=role, epoch=epoch, seq=seq, checksum=checksum, applied=applied,
                 pushes=n if pushes is None else pushes, audit=audit)
    return ev(99, "final-state", v)


def promote(t, shard, epoch, node, seq=0):
    return ev(t, "promote", {"shard": shard, "epoch": epoch, "node": node, "seq": seq, "isr": []}, node=node)


def pull(t0, t1, worker, shard, since, epoch, seq, keys, op, crcs=None):
    """A pull's invoke and ok; `crcs` = (state_crc, copy_crc) records the digests a delta pull carries."""
    extra = {} if crcs is None else {"state_crc": crcs[0], "copy_crc": crcs[1]}
    return [ev(t0, "pull", {"worker": worker, "shard": shard, "min_clock": -1}, "invoke", worker, op),
            ev(t1, "pull", {"worker": worker, "shard": shard, "min_clock": -1, "since": since, "epoch": epoch,
                            "seq": seq, "keys": keys, "node": "shard-0/0", "bytes": 4, **extra}, "ok", worker, op)]


def done(worker, steps=10, loss=0.05, target=0.1, t=9):
    return ev(t, "train-done", {"worker": worker, "steps": steps, "final_loss": loss, "target_loss": target})


def fault_start(t, kind, target, index=None, **extra):
    v = {"kind": kind, "target": target, **extra}
    if index is not None:
        v["index"] = index
    return ev(t, "fault-start", v)


def fault_stop(t, kind, target, index=None, **extra):
    v = {"kind": kind, "target": target, **extra}
    if index is not None:
        v["index"] = index
    return ev(t, "fault-stop", v)
