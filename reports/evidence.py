"""From a failing check's evidence to the moment it happened.

Checkers name the operations that prove a violation by op id (`"pull": "worker-1:393"`), by
the request (`worker`, `req_id`) or by a time (`t`); the report links each one to that moment
in the timeline, so a reader goes from "stale cursor" to what every node was doing then.
"""
from __future__ import annotations

from dataclasses import dataclass

MAX_PER_CHECK = 12          # more than this is a pattern; the evidence JSON still lists all


@dataclass(frozen=True)
class Moment:
    """One instant a check's evidence points at: where (lane), when, and what."""
    id: str
    t: float
    node: str | None
    label: str


class _Index:
    """Op ids and push requests of a history, to resolve what evidence names."""

    def __init__(self, history: list[dict]):
        self.ops: dict[str, tuple[float, str, str]] = {}
        self.reqs: dict[tuple, str] = {}
        for e in history:
            op = e.get("op_id")
            if op is None:
                continue
            if e["type"] != "invoke" or op not in self.ops:     # the completion wins over the invoke
                self.ops[op] = (e["t"], e["node"], f"{e.get('f')} {e['type']}")
            v = e.get("value") or {}
            if e.get("f") == "push" and v.get("req_id") is not None:
                self.reqs.setdefault((v.get("worker"), v.get("req_id")), op)


def _walk(obj, found: list, idx: _Index, path: str) -> None:
    if len(found) >= MAX_PER_CHECK:
        return
    if isinstance(obj, dict):
        op = idx.reqs.get((obj.get("worker"), obj.get("req_id"))) if "req_id" in obj else None
        t = obj.get("t")
        if op is not None:
            found.append((op, path))
        elif isinstance(t, (int, float)) and not isinstance(t, bool):
            found.append((float(t), f"{path} {obj.get('node') or obj.get('worker') or ''}".strip()))
        for k, v in obj.items():
            _walk(v, found, idx, f"{path}.{k}" if path else str(k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _walk(v, found, idx, f"{path}[{i}]")
    elif isinstance(obj, str) and obj in idx.ops:
        found.append((obj, path))


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
            if isinstance(what, str):
                t, node, kind = idx.ops[what]
                label = f"{what} {kind} ({path})"
            else:
                t, node, label = what, None, f"{path} at t"
            if (t, node, label) in seen:
                continue
            seen.add((t, node, label))
            n += 1
            ms.append(Moment(f"moment-{n}", t, node, label))
        if ms:
            out[name] = ms
    return out
