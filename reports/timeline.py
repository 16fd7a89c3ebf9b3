"""The run as a timeline: one lane per node and worker, built from the history alone.

Jepsen's timeline (operations per process against time, faults shaded) is the view engineers
use to find a bug in a history; this is its model. Operations become marks by outcome (ok,
fail, info: indeterminate, duplicate: a retry of a request already sent), the copies' lanes
carry who was primary in which epoch and their own events (restart, checkpoint, sync, ISR
change, fencing), and faults are windows. `timeline_svg` draws it.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from pschaos.reports.keys import op_key, request_key

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
    """Pair invokes with completions by (process, op id); a push whose request (worker,
    incarnation, req_id, shard) was already sent, or acked as a duplicate (the PS had applied it
    before), is a duplicate; an invoke never completed (in flight when its worker was killed, or
    at the end) is indeterminate (info). A restarted worker's ids start again at 1: keyed by op id
    or (worker, req_id) alone, its fresh pushes would read as retries of the old incarnation's."""
    open_ops: dict[tuple, dict] = {}
    sent: set[tuple] = set()
    dup: set[tuple] = set()
    for e in history:
        if e.get("op_id") is None:
            continue
        key = op_key(e)
        if e["type"] == "invoke":
            open_ops[key] = e
            v = e.get("value") or {}
            if e.get("f") == "push" and v.get("req_id") is not None:
                req = request_key(v)
                if req in sent:
                    dup.add(key)
                sent.add(req)
            continue
        inv = open_ops.pop(key, None)
        again = key in dup or (e.get("value") or {}).get("duplicate")     # re-sent, or acked as already applied
        outcome = "duplicate" if again and e["type"] == "ok" else e["type"]
        if outcome not in OUTCOMES:
            continue
        took = f", {1000 * (e['t'] - inv['t']):.0f} ms" if inv else ""
        lane(e["node"]).marks.append((e["t"], outcome, f"{e.get('f')} {outcome} ({e['op_id']}{took})"))
    for inv in open_ops.values():
        lane(inv["node"]).marks.append((inv["t"], "info", f"{inv.get('f')} never completed ({inv['op_id']})"))


def _event_label(e: dict) -> str:
    v = e.get("value") or {}
    if e["f"] == "sync":
        return f"sync → {v.get('dst')} ({v.get('kind')}, {v.get('bytes')} B)"
    if e["f"] == "isr":
        change = f"+{v['added']}" if v.get("added") else f"−{v.get('removed')}"
        return f"ISR {change} at epoch {v.get('epoch')}"
    detail = v.get("reason") or v.get("source") or v.get("error") or (f"seq {v['seq']}" if "seq" in v else "")
    return f"{e['f']} {detail}".strip()


def fault_label(f: dict) -> str:
    """How a fault window is named on every plot of a run: `kill shard-0/0`."""
    return f"{f['kind']} {f['target']}"


def promotions(history: list[dict]) -> dict[int, list[tuple[float, int, str]]]:
    """Each shard's promotions in time order: (t, epoch, node); who was primary from when."""
    proms: dict[int, list[tuple[float, int, str]]] = {}
    for e in history:
        if e.get("f") == "promote":
            v = e["value"]
            proms.setdefault(v["shard"], []).append((e["t"], v["epoch"], v["node"]))
    return {shard: sorted(ps) for shard, ps in proms.items()}


def build(history: list[dict], faults: list[dict]) -> Timeline:
    """The timeline of one run from its history and its report's fault windows."""
    lanes: dict[str, Lane] = {}

    def lane(name: str) -> Lane:
        return lanes.setdefault(name, Lane(name))

    end = max((e["t"] for e in history if math.isfinite(e["t"])), default=1.0)     # NaN would poison max()
    for e in history:
        node = e.get("node")
        if node and node != "harness":
            lane(node)
    _ops(history, lane)
    for e in history:
        if e.get("f") in NODE_EVENTS and e.get("node") in lanes:
            lanes[e["node"]].events.append((e["t"], _event_label(e)))
    for ps in promotions(history).values():
        for i, (t, epoch, node) in enumerate(ps):
            stop = ps[i + 1][0] if i + 1 < len(ps) else end
            lane(node).primary.append((t, stop, f"e{epoch} primary"))
    windows = []
    for f in faults:
        label = fault_label(f)
        windows.append((f["start_s"], f["end_s"], label))
        if f["kind"] in DOWN_KINDS and f["target"] in lanes:
            lanes[f["target"]].down.append((f["start_s"], f["end_s"], f"{f['kind']}: down"))
    return Timeline(sorted(lanes.values(), key=lambda ln: _order(ln.name)), windows,
                    max([end] + [b for _, b, _ in windows]))
