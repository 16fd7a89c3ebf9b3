"""The run as a timeline: one lane per node and worker, built from the history alone.

Jepsen's timeline (operations per process against time, faults shaded) is the view engineers
use to find a bug in a history; this is its model. Operations become marks by outcome (ok,
fail, info: indeterminate, duplicate: a retry of a request already sent), the copies' lanes
carry who was primary in which epoch and their own events (restart, checkpoint, sync, ISR
change, fencing), and faults are windows. `timeline_svg` draws it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

OUTCOMES = ("ok", "duplicate", "info", "fail")
# node events worth a mark on the node's lane; samples and training steps would only be noise
NODE_EVENTS = {"start", "checkpoint", "checkpoint-skipped", "sync", "isr", "isr-deferred", "restore", "load",
               "step-down", "fenced", "lease-lost", "election-error"}
DOWN_KINDS = {"kill", "stop", "pause", "restart"}


@dataclass
class Lane:
    """One node or worker: op marks (t, outcome, what), primary bands, node events."""
    name: str
    marks: list[tuple[float, str, str]] = field(default_factory=list)
    primary: list[tuple[float, float, str]] = field(default_factory=list)
    down: list[tuple[float, float, str]] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Timeline:
    lanes: list[Lane]
    faults: list[tuple[float, float, str]]
    end: float


def _order(name: str) -> tuple:
    """shard copies first (shard-0/0, shard-0/1, ... shard-10/0), then workers, then the rest."""
    kind = 0 if name.startswith("shard-") else 1 if name.startswith("worker-") else 2
    return (kind, [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)])


def _ops(history: list[dict], lane) -> None:
    """Pair invokes with completions by op_id; a push re-sent with a (worker, req_id) already
    sent, or acked as a duplicate (the PS had applied it before), is a duplicate; an invoke
    never completed is indeterminate (info)."""
    open_ops: dict[str, dict] = {}
    sent: set[tuple] = set()
    dup: set[str] = set()
    for e in history:
        op = e.get("op_id")
        if op is None:
            continue
        if e["type"] == "invoke":
            open_ops[op] = e
            v = e.get("value") or {}
            if e.get("f") == "push" and v.get("req_id") is not None:
                key = (v.get("worker"), v.get("req_id"), v.get("shard"))
                if key in sent:
                    dup.add(op)
                sent.add(key)
            continue
        inv = open_ops.pop(op, None)
        again = op in dup or (e.get("value") or {}).get("duplicate")     # re-sent, or acked as already applied
        outcome = "duplicate" if again and e["type"] == "ok" else e["type"]
        if outcome not in OUTCOMES:
            continue
        took = f", {1000 * (e['t'] - inv['t']):.0f} ms" if inv else ""
        lane(e["node"]).marks.append((e["t"], outcome, f"{e.get('f')} {outcome} ({op}{took})"))
    for op, inv in open_ops.items():
        lane(inv["node"]).marks.append((inv["t"], "info", f"{inv.get('f')} never completed ({op})"))


def _event_label(e: dict) -> str:
    v = e.get("value") or {}
    if e["f"] == "sync":
        return f"sync → {v.get('dst')} ({v.get('kind')}, {v.get('bytes')} B)"
    if e["f"] == "isr":
        change = f"+{v['added']}" if v.get("added") else f"−{v.get('removed')}"
        return f"ISR {change} at epoch {v.get('epoch')}"
    detail = v.get("reason") or v.get("source") or v.get("error") or (f"seq {v['seq']}" if "seq" in v else "")
    return f"{e['f']} {detail}".strip()


def build(history: list[dict], faults: list[dict]) -> Timeline:
    """The timeline of one run from its history and its report's fault windows."""
    lanes: dict[str, Lane] = {}

    def lane(name: str) -> Lane:
        return lanes.setdefault(name, Lane(name))

    end = max((e["t"] for e in history), default=1.0)
    for e in history:
        node = e.get("node")
        if node and node != "harness":
            lane(node)
    _ops(history, lane)
    proms: dict[int, list[tuple[float, int, str]]] = {}
    for e in history:
        f, v = e.get("f"), e.get("value") or {}
        if f == "promote":
            proms.setdefault(v["shard"], []).append((e["t"], v["epoch"], v["node"]))
        elif f in NODE_EVENTS and e.get("node") in lanes:
            lanes[e["node"]].events.append((e["t"], _event_label(e)))
    for ps in proms.values():
        ps.sort()
        for i, (t, epoch, node) in enumerate(ps):
            stop = ps[i + 1][0] if i + 1 < len(ps) else end
            lane(node).primary.append((t, stop, f"e{epoch} primary"))
    windows = []
    for f in faults:
        label = f"{f['kind']} {f['target']}"
        windows.append((f["start_s"], f["end_s"], label))
        if f["kind"] in DOWN_KINDS and f["target"] in lanes:
            lanes[f["target"]].down.append((f["start_s"], f["end_s"], f"{f['kind']}: down"))
    return Timeline(sorted(lanes.values(), key=lambda ln: _order(ln.name)), windows,
                    max([end] + [b for _, b, _ in windows]))
