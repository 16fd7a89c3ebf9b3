"""Spurious failovers: a promotion while the old primary was alive and reachable.

A shard's life starts with its bootstrap promote: epoch 1, or a promote that says `bootstrap` (a
shard re-added after a scale-in starts above its old life's epochs: psnodes/elastic/retirement.py,
core.fencing.bootstrap_epoch). Within a life every promotion or restore takes the next epoch
(election.py: record epoch + 1), so the promote at epoch e names the old primary of the one at
e + 1. A failover is a promote that is not a life's first; it is excused, not spurious, when any
of these held within FAULT_EFFECT_S before the promotion (a fault that ended that long ago can
still be its cause: a restore waits a lease TTL plus suspect_s after the last ISR copy vanished):

- a process fault took the old primary away (`kill`, `stop`, `restart`, `pause`, `flap`; the
  runner names the node it hit in `target`, and a kill timed to a moment also names the primary
  it `deposed`, the `copy` it caught up and its `victims`);
- a slow-host fault (`cpu-throttle`, `memory-limit`, `disk-full`) on the old primary, but only
  with evidence that its process died: the backend's OOM kill (`reason: OOMKilled` or an
  `exit_code` in the fault's record) or a `start` event of the old primary (it was restarted)
  between the fault and the promotion. Without it the primary was slow but alive and reachable,
  the very case an adaptive detector must ride out;
- a cut of what the detector hears or of the primary's lease: a link from the old primary to a
  copy of its own shard (`primary->replica`: the primary dials its replicas, so the replication
  stream, the detector's only input, runs there in both directions) or to etcd (`partition`,
  `link-down`, `timeout`, `reset_peer`, `limit_data`, and `loss` of 100%; the runner lists the
  links in `links`). A cut of worker links, of another shard's links, or of `replica->primary`
  alone (the probe's path, not the stream's) leaves the primary alive and reachable;
- the old primary gave up primacy itself after its promotion and before this one (`lease-lost`,
  `step-down` or `fenced` in its own event log): etcd, not the detector, decided;
- the promotion is a restore (a `restore` event at its shard and epoch: no ISR copy's lease
  lived), or the old primary itself took the next epoch (no one replaced it);
- the old primary stood still off the CPU by its own clock: its `local-pause` events of that
  term (its elector woke that much later than it asked, the process using under half that in
  CPU time) leave no stretch of the silence its successor's `suspect` event stood on as long as
  the silence that detector suspects at, and cover half of an unanswered probe's round. The host
  did not run it, as with an injected `pause` (pschaos.harness.checkers.stalls). Each judged failover carries that `suspicion` (silence,
  threshold, the probe round) and the old primary's `old_primary_stalls`, so a spurious one says
  what the replica saw.

Degrading link faults (`latency`, `loss` under 100%, `bandwidth`, `slicer`) excuse nothing: the
primary is alive and reachable through them, so a promotion during one is exactly what an
adaptive failure detector must avoid.

Fail closed (unknown, and the `spurious_failovers` metric None), because a count of 0 must mean
every failover was seen and judged: no promote events at all; a promote without shard, epoch or
node; promotions sampled from an adapted system's view (a sample can miss one); a shard of the
cluster (run-start's `cluster.shards`, or named by any event below) without a promote at its
bootstrap epoch (its first failover would pass for its first term); a gap in a life's epochs (a
failover whose promote is missing, and the next one's old primary named wrongly; a term a kill
timed to a promotion cut off before its promote was written is no gap: the runner read the shard
record naming it, `caught_promoting`, and that term is judged like any other; so is a term any
kill cut off by chance, whose record the kill read once its copy was dead,
`primary_when_killed`); two nodes
promoted at one epoch; a push/pull `ok`, `suspect`, `probe-held`, `fenced` or `detector` event
naming a shard's epoch that no promote covers; a fault-start without a kind; and a failover whose
only excuse is a partly injected fault (`partial`: whether it bit cannot be told).
"""
from __future__ import annotations

import math

from pschaos.harness.checkers.base import KILLS, Verdict, by_f, unknown
from pschaos.harness.checkers.stalls import stall_excuse, stood_still, suspicion

FAULT_EFFECT_S = 2.5
PROCESS_KINDS = (*KILLS, "stop", "restart", "pause", "flap")
SLOW_HOST_KINDS = ("cpu-throttle", "memory-limit", "disk-full")
CUT_LINK_KINDS = ("partition", "link-down", "timeout", "reset_peer", "limit_data")
DEGRADING_LINK_KINDS = ("latency", "loss", "bandwidth", "slicer")
GAVE_UP = ("lease-lost", "step-down", "fenced")
# events that name a term of a shard: each must be covered by a promote
NAMES_EPOCH = (("push", "ok"), ("pull", "ok"), ("pull-rows", "ok"), ("suspect", None), ("probe-held", None), ("fenced", None),
               ("detector", None))
EXCUSES = ("a kill/stop/restart/pause/flap of the old primary",
           "cpu-throttle/memory-limit/disk-full of the old primary with an OOM kill or a restart on record",
           "a cut of a link from the old primary to a copy of its shard or to etcd",
           "the old primary gave up primacy itself (lease-lost, step-down, fenced)",
           "a restore, or the old primary took the next epoch itself",
           "the old primary stood still off the CPU by its own clock (local-pause) through the silence "
           "its successor stood on, no stretch of it as long as the detector's threshold")


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
                      "end": stops.get(v.get("index"), math.inf), "index": v.get("index"),
                      "partial": bool(v.get("partial")),
                      "died": v.get("reason") == "OOMKilled" or v.get("exit_code") is not None})
    return spans


def _name(span: dict) -> str:
    return f"{span['kind']} #{span['index']}"


def _copy_of(node: str, shard: int) -> bool:
    return node.startswith(f"shard-{shard}/")


def _cuts(span: dict, old: str, shard: int, starts: list[tuple[float, str]], t: float) -> bool:
    """The fault took `old`, primary of `shard` until the promotion at `t`, away (module docstring)."""
    kind = span["kind"]
    if kind in PROCESS_KINDS:
        return old in span["nodes"]
    if kind in SLOW_HOST_KINDS:
        restarted = any(n == old and span["start"] <= st <= t for st, n in starts)
        return old in span["nodes"] and (span["died"] or restarted)
    cutting = kind in CUT_LINK_KINDS or (kind == "loss" and float(span["params"].get("percent", 0)) >= 100)
    if not cutting:
        return False
    for link in span["links"]:
        src, _, dst = link.partition("->")
        if src == old and (dst == "etcd" or (dst != old and _copy_of(dst, shard))):
            return True
    return False


def _caught_promoting(history: list[dict]) -> list[tuple]:
    """Terms whose promote event a kill cut off: timed to a promotion, the runner read the shard
    record naming the successor (`caught_promoting`'s epoch, the kill's `target`) and killed it
    before it could write the event (harness/faults/moments.py kill_mid_promotion); any kill
    reads the record once its copies are dead, and one naming a dead copy is
    `primary_when_killed` ({epoch, node}; faults/process.py)."""
    out = []
    for e in by_f(history, "fault-start"):
        v = e.get("value", {})
        caught = v.get("caught_promoting") or v.get("primary_when_killed")
        if isinstance(caught, dict) and caught.get("epoch") is not None and v.get("shard") is not None \
                and v.get("target") and not v.get("partial"):
            out.append((e["t"], v["shard"], caught["epoch"], caught.get("node") or v["target"]))
    return out


def _terms(history: list[dict], rows: list[tuple], boots: set) -> dict | str:
    """(shard, epoch) -> the node promoted then, with every life's epochs complete; or why not."""
    term: dict[tuple[int, int], str] = {}
    for t, shard, epoch, node in rows:
        if term.setdefault((shard, epoch), node) != node:
            return f"shard {shard}: two nodes promoted at epoch {epoch} ({term[(shard, epoch)]}, {node})"
    by_shard: dict[int, list[int]] = {}
    for shard, epoch in sorted(term):
        by_shard.setdefault(shard, []).append(epoch)
    for shard, epochs in by_shard.items():
        if epochs[0] != 1 and (shard, epochs[0]) not in boots:
            return (f"shard {shard}: no promote event at its bootstrap epoch (the lowest seen is {epochs[0]}, "
                    "neither 1 nor a bootstrap): its failovers before that cannot be told from its first term")
        for lo, hi in zip(epochs, epochs[1:]):
            if hi != lo + 1 and (shard, hi) not in boots:
                return (f"shard {shard}: its epochs jump from {lo} to {hi}: the promotion at {lo + 1} left no "
                        "event, so a failover is missing and the next one's old primary is unknown")
    for e in history:
        for f, typ in NAMES_EPOCH:
            v = e.get("value")
            if e.get("f") == f and (typ is None or e.get("type") == typ) and isinstance(v, dict) \
                    and v.get("epoch") is not None and v.get("shard") is not None:
                if (v["shard"], v["epoch"]) not in term:
                    return (f"shard {v['shard']}: a {f} event at t={e.get('t')} names epoch {v['epoch']}, which no "
                            "promote event covers (a node's event log is missing or cut short)")
    run_start = next(iter(by_f(history, "run-start")), None)
    shards = ((run_start or {}).get("value", {}).get("cluster") or {}).get("shards") or 0
    for shard in range(int(shards)):
        if shard not in by_shard:
            return f"shard {shard}: of the cluster's {shards} shards, this one has no promote event at all"
    return term


def judge(history: list[dict]) -> Verdict:
    """Each failover judged spurious or excused (details say which and why)."""
    promotes = by_f(history, "promote")
    if not promotes:
        return unknown("no promote events: the nodes' event logs are missing, so no failover can be judged")
    rows = []
    boots = set()      # a re-added shard's first term (psnodes/elastic/retirement.py): no failover of anyone
    for e in promotes:
        v = e.get("value", {})
        if not all(k in v for k in ("shard", "epoch", "node")):
            return unknown(f"a promote event at t={e.get('t')} lacks shard, epoch or node", event=v)
        if "seen_by" in v:
            return unknown("promotions sampled from an adapted system's view: a failover between two samples "
                           "leaves no event, so none can be counted")
        rows.append((e["t"], v["shard"], v["epoch"], v["node"]))
        if v.get("bootstrap"):
            boots.add((v["shard"], v["epoch"]))
    seen = {(shard, epoch): node for t, shard, epoch, node in rows}
    rows += [r for r in _caught_promoting(history) if seen.get((r[1], r[2])) != r[3]]   # a third node: two at one epoch
    term = _terms(history, rows, boots)
    if isinstance(term, str):
        return unknown(term)
    spans = _fault_spans(history)
    if isinstance(spans, str):
        return unknown(spans)
    gave_up = [(e["t"], e["node"]) for e in history if e.get("f") in GAVE_UP]
    starts = [(e["t"], e["node"]) for e in by_f(history, "start")]
    restores = [(e["t"], e["value"].get("shard"), e["value"].get("epoch")) for e in by_f(history, "restore")]
    promoted_at = {(shard, epoch): t for t, shard, epoch, node in rows}
    judged, spurious = [], []
    for t, shard, epoch, node in sorted(rows):
        if epoch == 1 or (shard, epoch) in boots:
            continue
        old = term[(shard, epoch - 1)]
        near = [s for s in spans if s["start"] <= t and s["end"] + FAULT_EFFECT_S >= t and _cuts(s, old, shard, starts, t)]
        why = [_name(s) for s in near if not s["partial"]]
        why += [f"{old} gave up primacy at t={round(gt, 3)}" for gt, n in gave_up
                if n == old and promoted_at[(shard, epoch - 1)] <= gt <= t]
        if node == old:
            why.append(f"{old} itself took the next epoch")
        why += [f"a restore at t={round(rt, 3)}" for rt, rs, re_ in restores if rs == shard and re_ == epoch]
        seen = suspicion(history, shard, epoch - 1, node, t)
        stalls = stood_still(history, old, shard, epoch - 1, seen)
        stalled = stall_excuse(old, seen, stalls)
        if stalled:
            why.append(stalled)
        if not why and near:
            return unknown(f"shard {shard}: the promotion at epoch {epoch} (t={round(t, 3)}) is explained only by a "
                           f"partly injected fault ({', '.join(map(_name, near))}): "
                           "whether it bit cannot be told")
        row = {"t": round(t, 3), "shard": shard, "epoch": epoch, "node": node, "old_primary": old,
               "excused_by": why, "suspicion": seen, "old_primary_stalls": stalls}
        judged.append(row)
        if not why:
            row["degrading_faults"] = [_name(s) for s in spans
                                       if s["start"] <= t <= s["end"] + FAULT_EFFECT_S
                                       and s["kind"] in DEGRADING_LINK_KINDS]
            spurious.append(row)
    return Verdict(not spurious, {"spurious": spurious, "count": len(spurious), "failovers": judged,
                                  "fault_effect_s": FAULT_EFFECT_S, "excuses": list(EXCUSES)})


def no_spurious_failovers(history: list[dict], ctx: dict) -> Verdict:
    """The check: no promotion while the old primary was alive and reachable (not excused by a fault that took it away or cut its replicas off, by its giving up primacy, by a restore, or by its own record of standing still off the CPU through its successor's silence); each failover carries what its successor saw (silence, threshold, probe round)."""
    return judge(history)


def spurious_count(history: list[dict]) -> int | None:
    """The `spurious_failovers` metric: None when the history cannot say (fail closed)."""
    v = judge(history)
    return None if v.valid == "unknown" else v.details["count"]
