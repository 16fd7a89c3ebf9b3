"""From a failing check's evidence to the moment it happened.

Checkers name the operations that prove a violation by op id (`"pull": "worker-1:393"`), by
the request (`worker`, `req_id`, with `incarnation`, `shard`, `epoch`, `seq` when known) or by a
time (`t`); the report links each one to that moment
in the timeline, so a reader goes from "stale cursor" to what every node was doing then.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from pschaos.reports.keys import op_key, request_key

MAX_PER_CHECK = 12          # more than this is a pattern; the evidence JSON still lists all


@dataclass(frozen=True)
class Moment:
    """One instant a check's evidence points at: where (lane), when, and what."""
    id: str
    t: float
    node: str | None
    label: str


@dataclass
class _Op:
    """One operation (a process's op id): its completion when it has one, else its invoke."""
    t: float
    node: str
    kind: str
    pid: object
    op_id: str
    value: dict
    ok: bool = False


class _Index:
    """The operations and push requests of a history, to resolve what evidence names.

    Keys are the checkers' (`keys`): an op id names one operation per process (a restarted
    worker reuses its ids), a request is (worker, incarnation, req_id, shard)."""

    def __init__(self, history: list[dict]):
        ops: dict[tuple, _Op] = {}
        for e in history:
            if e.get("op_id") is None:
                continue
            key, v = op_key(e), e.get("value") or {}
            old = ops.get(key)
            if old is None or e["type"] != "invoke":      # the completion wins over the invoke
                merged = {**(old.value if old else {}), **v}
                ops[key] = _Op(e["t"], e["node"], f"{e.get('f')} {e['type']}", e.get("pid"), e["op_id"], merged,
                               e["type"] == "ok")
        self.by_id: dict[str, list[_Op]] = {}
        self.pushes: dict[tuple, list[_Op]] = {}
        for key, op in ops.items():
            self.by_id.setdefault(op.op_id, []).append(op)
            if op.kind.startswith("push ") and op.value.get("req_id") is not None:
                w, _, req, _ = request_key(op.value)
                self.pushes.setdefault((w, req), []).append(op)

    def op(self, op_id: str, ctx: dict) -> list[_Op]:
        """The op an id names, told apart by the evidence's own `pid` or `t` when it is reused."""
        cands = self.by_id.get(op_id, [])
        if len(cands) > 1 and ctx.get("pid") is not None:
            cands = [o for o in cands if o.pid == ctx["pid"]] or cands
        t = ctx.get("t")
        if len(cands) > 1 and isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
            cands = [min(cands, key=lambda o: abs(o.t - t))]
        return cands

    def request(self, ev: dict) -> list[_Op]:
        """The acked push of the request `ev` names (worker, req_id, and when given incarnation,
        shard, epoch and seq); a failed or unanswered send only when no send of it was acked."""
        cands = [o for o in self.pushes.get((ev.get("worker"), ev.get("req_id")), [])
                 if all(ev.get(k) is None or request_key(o.value)[i] == ev[k]
                        for i, k in ((1, "incarnation"), (3, "shard")))]
        acked = [o for o in cands if o.ok]
        exact = [o for o in acked if all(ev.get(k) is None or o.value.get(k) == ev[k] for k in ("epoch", "seq"))]
        return exact or acked or cands[-1:]


def _walk(obj, found: list, idx: _Index, path: str) -> None:
    if len(found) >= MAX_PER_CHECK:
        return
    if isinstance(obj, dict):
        ops = idx.request(obj) if "req_id" in obj else []
        for k, v in obj.items():
            if isinstance(v, str):
                ops += idx.op(v, obj)
        for op in ops:
            found.append((op, path))
        t = obj.get("t")
        if not ops and isinstance(t, (int, float)) and not isinstance(t, bool):
            found.append((float(t), f"{path} {obj.get('node') or obj.get('worker') or ''}".strip()))
        for k, v in obj.items():
            if not isinstance(v, str):
                _walk(v, found, idx, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _walk(v, found, idx, f"{path}[{i}]")
    elif isinstance(obj, str):
        found += [(op, path) for op in idx.op(obj, {})]


def moments(checks: dict, history: list[dict]) -> dict[str, list[Moment]]:
    """For every check that did not pass, the moments its evidence names (op ids, requests, times)."""
    idx = _Index(history)
    out: dict[str, list[Moment]] = {}
    n = 0
    for name, c in checks.items():
        if c.get("valid") is True:
            continue
        found: list = []
        _walk(c.get("details", {}), found, idx, "")
        seen, ms = set(), []
        for what, path in found:
            if isinstance(what, _Op):
                t, node = what.t, what.node
                again = f" pid {what.pid}" if len(idx.by_id.get(what.op_id, [])) > 1 else ""
                label = f"{what.op_id} {what.kind}{again} ({path})"
            else:
                t, node, label = what, None, f"{path} at t"
            if not math.isfinite(t):
                continue
            if (t, node, label) in seen:
                continue
            seen.add((t, node, label))
            n += 1
            ms.append(Moment(f"moment-{n}", t, node, label))
        if ms:
            out[name] = ms
    return out
