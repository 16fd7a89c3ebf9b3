"""Spurious failovers: a promotion while the old primary was alive and reachable.

A failover is the promotion of a shard's copy at an epoch above the first one the history shows
for that shard (a restore counts too: it is a promotion). Its old primary is the node promoted
at the highest lower epoch of that shard. The failover is excused, not spurious, when any of
these held within FAULT_EFFECT_S before the promotion (a fault that ended that long ago can
still be its cause: a restore waits a lease TTL plus suspect_s after the last ISR copy vanished):

- a process fault acted on the old primary (`kill`, `stop`, `restart`, `pause`, `flap`,
  `cpu-throttle`, `memory-limit`, `disk-full`: each changes the primary process itself; the
  runner names the node it hit in `target`, and a kill timed to a moment also names the primary
  it `deposed`, the `copy` it caught up and its `victims`);
- a link fault cut a link with the old primary at either end (`partition`,
  `link-down`, `timeout`, `reset_peer`, `limit_data`, and `loss` of 100%); the runner lists
  the links in `links`;
- the old primary gave up primacy itself before the promotion (`lease-lost`, `step-down` or
  `fenced` in its own event log after it was promoted): etcd, not the detector, decided;
- the promotion is a restore (a `restore` event at its shard and epoch: no ISR copy's lease
  lived), or the old primary itself took the next epoch (no one replaced it).

Degrading link faults (`latency`, `loss` under 100%, `bandwidth`, `slicer`) excuse nothing: the
primary is alive and reachable through them, so a promotion during one is exactly what an
adaptive failure detector must avoid. Fail closed: no promote events at all (the nodes' event
logs are missing), a promote event without shard, epoch or node, a fault-start without a kind,
or a failover with no earlier promotion of its shard to name the old primary: unknown.
"""
from __future__ import annotations

import math

from .base import Verdict, by_f, unknown

FAULT_EFFECT_S = 2.5
PROCESS_KINDS = ("kill", "stop", "restart", "pause", "flap", "cpu-throttle", "memory-limit", "disk-full")
CUT_LINK_KINDS = ("partition", "link-down", "timeout", "reset_peer", "limit_data")
DEGRADING_LINK_KINDS = ("latency", "loss", "bandwidth", "slicer")
GAVE_UP = ("lease-lost", "step-down", "fenced")


def _fault_spans(history: list[dict]) -> list[dict] | str:
    """Each fault with its start, its end (inf when never healed), kind, target and links; or why
    the history cannot say."""
    stop_events = [e for e in by_f(history, "fault-stop") if "index" in e.get("value", {})]
    stops = {e["value"]["index"]: e["t"] for e in stop_events}
    stop_victims = {e["value"]["index"]: e["value"].get("victims") or [] for e in stop_events}
    spans = []
    for e in by_f(history, "fault-start"):
        v = e.get("value", {})
        if "kind" not in v:
            return f"a fault-start at t={e.get('t')} names no kind"
        # a kill timed to a moment hits more than its target: the primary it deposed, the copy it
        # caught up, every victim it names at its start or stop
        hit = {v.get("target", ""), v.get("deposed"), v.get("copy"), *(v.get("victims") or []),
               *stop_victims.get(v.get("index"), [])}
        spans.append({"kind": v["kind"], "nodes": {n for n in hit if n}, "links": v.get("links") or [],
                      "params": v.get("params") or {}, "start": e["t"],
                      "end": stops.get(v.get("index"), math.inf), "index": v.get("index")})
    return spans


def _cuts(span: dict, node: str) -> bool:
    """The fault took `node` away: a process fault on it, or a cut of one of its links."""
    kind = span["kind"]
    if kind in PROCESS_KINDS:
        return node in span["nodes"]
    cutting = kind in CUT_LINK_KINDS or (kind == "loss" and float(span["params"].get("percent", 0)) >= 100)
    return cutting and any(node in link.split("->") for link in span["links"])


def judge(history: list[dict]) -> Verdict:
    """Each failover judged spurious or excused (details say which and why)."""
    promotes = by_f(history, "promote")
    if not promotes:
        return unknown("no promote events: the nodes' event logs are missing, so no failover can be judged")
    rows = []
    boots = set()      # a re-added shard's first term (psnodes/retirement.py): no failover of anyone
    for e in promotes:
        v = e.get("value", {})
        if not all(k in v for k in ("shard", "epoch", "node")):
            return unknown(f"a promote event at t={e.get('t')} lacks shard, epoch or node", event=v)
        rows.append((e["t"], v["shard"], v["epoch"], v["node"]))
        if v.get("bootstrap"):
            boots.add((v["shard"], v["epoch"]))
    spans = _fault_spans(history)
    if isinstance(spans, str):
        return unknown(spans)
    gave_up = [(e["t"], e["node"]) for e in history if e.get("f") in GAVE_UP]
    restores = [(e["t"], e["value"].get("shard"), e["value"].get("epoch")) for e in by_f(history, "restore")]
    first = {}
    for t, shard, epoch, node in sorted(rows, key=lambda r: (r[1], r[2], r[0])):
        first.setdefault(shard, epoch)
    judged, spurious = [], []
    for t, shard, epoch, node in sorted(rows):
        if epoch <= first[shard] or (shard, epoch) in boots:
            continue
        before = [r for r in rows if r[1] == shard and r[2] < epoch]
        if not before:
            return unknown(f"shard {shard}: epoch {epoch} has no earlier promotion to name its old primary")
        prev = max(before, key=lambda r: (r[2], r[0]))
        old = prev[3]
        why = [f"{s['kind']} #{s['index']}" for s in spans
               if s["start"] <= t and s["end"] + FAULT_EFFECT_S >= t and _cuts(s, old)]
        why += [f"{old} gave up primacy at t={round(gt, 3)}" for gt, n in gave_up if n == old and prev[0] <= gt <= t]
        if node == old:
            why.append(f"{old} itself took the next epoch")
        why += [f"a restore at t={round(rt, 3)}" for rt, rs, re_ in restores if rs == shard and re_ == epoch]
        row = {"t": round(t, 3), "shard": shard, "epoch": epoch, "node": node, "old_primary": old,
               "excused_by": why}
        judged.append(row)
        if not why:
            row["degrading_faults"] = [f"{s['kind']} #{s['index']}" for s in spans
                                       if s["start"] <= t <= s["end"] + FAULT_EFFECT_S
                                       and s["kind"] in DEGRADING_LINK_KINDS]
            spurious.append(row)
    return Verdict(not spurious, {"spurious": spurious, "count": len(spurious), "failovers": judged,
                                  "fault_effect_s": FAULT_EFFECT_S})


def no_spurious_failovers(history: list[dict], ctx: dict) -> Verdict:
    """The check: no promotion while the old primary was alive and reachable."""
    return judge(history)


def spurious_count(history: list[dict]) -> int | None:
    """The `spurious_failovers` metric: None when the history cannot say (fail closed)."""
    v = judge(history)
    return None if v.valid == "unknown" else v.details["count"]
