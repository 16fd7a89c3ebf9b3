"""acks-durable: in sync mode every acknowledgement is as durable as a first attempt's.

A sync ack promises the entry is on every in-sync replica. no-lost-acks sees a broken promise
only when a failover later loses the entry; an ack answered early (a retry recognised from the
dedup table and acknowledged without waiting for the ISR) can slip through when the failover
comes late or never. So each ack (shard, epoch E, seq S) is held against two records of what
the ISR held, whether or not anything was lost:

- the next epoch's promotion: the copy promoted from E's ISR began at a seq >= S (an epoch that
  began with a restore from checkpoint is losses-accounted's to judge);
- the replicas' own status, sampled by the harness: a member of E's ISR at the ack, still a
  member when sampled (by the `isr` and `promote` events) and not restarted in between, never
  reports a seq below S at epoch E after the ack. Samples within SAMPLE_SLACK_S of the ack are
  not used: the status call may have been answered before the ack.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict

from pschaos.harness.checkers.base import Verdict, by_f, unknown

SAMPLE_SLACK_S = 0.25        # the sampler's status timeout (0.2 s) and then some


def _isr_timeline(history: list[dict]) -> dict[tuple[int, int], list[tuple[float, frozenset]]]:
    """(shard, epoch) -> [(t, ISR from then on)], from each epoch's promote and its isr changes."""
    out: dict[tuple[int, int], list[tuple[float, frozenset]]] = defaultdict(list)
    for e in by_f(history, "promote") + by_f(history, "isr"):
        v = e["value"]
        if "isr" in v and "shard" in v and "epoch" in v:
            out[(v["shard"], v["epoch"])].append((e["t"], frozenset(v["isr"])))
    for xs in out.values():
        xs.sort(key=lambda x: x[0])
    return out


def _isr_at(line: list[tuple[float, frozenset]], t: float) -> frozenset:
    i = bisect_right([x[0] for x in line], t)
    return line[i - 1][1] if i else frozenset()


def acks_durable(history: list[dict], ctx: dict) -> Verdict:
    """In sync mode no ack promised what its ISR did not hold: the next epoch's promotion began at a
    seq at or above it, and no replica still in the ISR reported a lower seq after it."""
    if ctx.get("replication", "sync") != "sync":
        return unknown("async replication acks before its replicas apply: there is no ISR promise to judge")
    oks = [(e["t"], e["value"]) for e in by_f(history, "push", "ok")]
    if not oks:
        return unknown("no push was acknowledged: no promise to judge")
    restored = {(e["value"]["shard"], e["value"].get("epoch")) for e in by_f(history, "restore")}
    promotes = defaultdict(list)
    for e in by_f(history, "promote"):
        v = e["value"]
        if "seq" in v and not v.get("bootstrap"):
            promotes[v["shard"]].append(v)
    isr = _isr_timeline(history)
    starts = defaultdict(list)
    for e in by_f(history, "start"):
        starts[e.get("node")].append(e["t"])
    samples = defaultdict(list)
    for e in by_f(history, "sample"):
        v = e["value"]
        if v.get("role") == "replica":
            samples[(v["shard"], v["epoch"])].append((e["t"], v["node"], v["seq"]))
    ahead, unheld, judged_next, judged_samples = [], [], 0, 0
    for t, v in oks:
        shard, epoch, seq = v.get("shard"), v.get("epoch"), v.get("seq")
        if None in (shard, epoch, seq):
            return unknown("an acknowledged push without its shard, epoch or seq: cannot place it", example=v)
        nxt = min((p for p in promotes[shard] if p["epoch"] > epoch), key=lambda p: p["epoch"], default=None)
        if nxt is not None and (shard, nxt["epoch"]) not in restored:
            judged_next += 1
            if nxt["seq"] < seq:
                ahead.append({"worker": v.get("worker"), "req_id": v.get("req_id"), "shard": shard, "epoch": epoch,
                              "seq": seq, "duplicate": v.get("duplicate", False), "t": round(t, 4),
                              "next_epoch": nxt["epoch"], "promoted_at_seq": nxt["seq"], "promoted": nxt.get("node")})
        line = isr.get((shard, epoch), [])
        members = _isr_at(line, t) - {v.get("node")}
        for ts, node, got in samples.get((shard, epoch), ()):
            if node not in members or ts <= t + SAMPLE_SLACK_S or node not in _isr_at(line, ts):
                continue
            if any(t < s <= ts for s in starts.get(node, ())):
                continue                            # restarted since: it catches up again from its checkpoint
            judged_samples += 1
            if got < seq:
                unheld.append({"worker": v.get("worker"), "req_id": v.get("req_id"), "shard": shard, "epoch": epoch,
                               "seq": seq, "duplicate": v.get("duplicate", False), "t": round(t, 4),
                               "replica": node, "replica_seq": got, "sampled_t": round(ts, 4)})
                break
    details = {"acks": len(oks), "judged_by_next_promotion": judged_next, "judged_by_samples": judged_samples,
               "ahead_of_next_promotion": ahead[:10], "ahead_count": len(ahead),
               "not_on_isr": unheld[:10], "not_on_isr_count": len(unheld)}
    if not judged_next and not judged_samples and not ahead and not unheld:
        return unknown("no ack was followed by a promotion from its ISR or by a sample of its replicas", **details)
    return Verdict(not ahead and not unheld, details)
