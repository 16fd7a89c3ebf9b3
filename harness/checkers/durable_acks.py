"""acks-durable and reads-committed: in sync mode every acknowledgement is as durable as a first
attempt's, and every read is of state the in-sync replicas hold.

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

A pull in sync mode waits for its state to be replicated before it answers, so the same two
records judge reads (reads-committed): a pull of an entry no in-sync replica held is a dirty
read, visible whether or not a failover later undoes it. A third record judges every read at
once: the reply carries the ISR watermark it was served at (PullReply.committed, the lowest seq
an in-sync copy had applied, read under the same lock as the state), and a read whose seq is
above it showed entries that were not yet on every in-sync copy.
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


def _held_by_isr(history: list[dict], answers: list[tuple[float, dict]], what: str) -> tuple[list, list, int, int]:
    """For each answer (an ack or a read at shard, epoch E, seq S, by node): whether the next
    epoch's promotion began at a seq >= S, and whether a replica still in E's ISR reported a
    lower seq after it. (ahead of the next promotion, not on the ISR, judged by promotion, by samples)."""
    restored = {(e["value"]["shard"], e["value"].get("epoch")) for e in by_f(history, "restore")}
    promotes = defaultdict(list)          # bootstraps too: a re-added shard's life is not the old one's
    for e in by_f(history, "promote"):
        v = e["value"]
        if "seq" in v:
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
    for t, v in answers:
        shard, epoch, seq = v["shard"], v["epoch"], v["seq"]
        who = {"worker": v.get("worker"), what: v.get("req_id", v.get("op")), "shard": shard, "epoch": epoch,
               "seq": seq, "t": round(t, 4), **({"duplicate": True} if v.get("duplicate") else {})}
        nxt = min((p for p in promotes[shard] if p["epoch"] > epoch), key=lambda p: p["epoch"], default=None)
        if nxt is not None and (shard, nxt["epoch"]) not in restored and not nxt.get("bootstrap"):
            judged_next += 1
            if nxt["seq"] < seq:
                ahead.append({**who, "next_epoch": nxt["epoch"], "promoted_at_seq": nxt["seq"],
                              "promoted": nxt.get("node")})
        line = isr.get((shard, epoch), [])
        members = _isr_at(line, t) - {v.get("node")}
        for ts, node, got in samples.get((shard, epoch), ()):
            if node not in members or ts <= t + SAMPLE_SLACK_S or node not in _isr_at(line, ts):
                continue
            if any(t < s <= ts for s in starts.get(node, ())):
                continue                            # restarted since: it catches up again from its checkpoint
            judged_samples += 1
            if got < seq:
                unheld.append({**who, "replica": node, "replica_seq": got, "sampled_t": round(ts, 4)})
                break
    return ahead, unheld, judged_next, judged_samples


def _placed(history: list[dict], f: str) -> tuple[list[tuple[float, dict]], dict | None]:
    """The `f` answers (push or pull ok) with shard, epoch and seq; the first without them, if any."""
    out = [(e["t"], {**e["value"], "op": e.get("op_id")}) for e in by_f(history, f, "ok")]
    bad = next((v for _, v in out if None in (v.get("shard"), v.get("epoch"), v.get("seq"))), None)
    return out, bad


def _past_watermark(answers: list[tuple[float, dict]]) -> tuple[list, int, int]:
    """Reads whose reply names an ISR watermark (`committed`) below their seq, how many named one,
    and how many did not (a node from before the field: judged by the other two records alone)."""
    marked = [(t, v) for t, v in answers if v.get("committed") is not None]
    past = [{"worker": v.get("worker"), "op": v.get("op"), "shard": v["shard"], "epoch": v["epoch"], "seq": v["seq"],
             "committed": v["committed"], "node": v.get("node"), "t": round(t, 4)}
            for t, v in marked if int(v["committed"]) < int(v["seq"])]
    return past, len(marked), len(answers) - len(marked)


def _verdict(ahead: list, unheld: list, judged_next: int, judged_samples: int, n: int, noun: str,
             past: list | None = None, marked: int = 0, unmarked: int = 0) -> Verdict:
    """The watermark can fail a read on its own; a pass needs the records the node does not write
    itself (the next promotion, the replicas' samples): the watermark is the node's own account."""
    past = past or []
    details = {noun: n, "judged_by_next_promotion": judged_next, "judged_by_samples": judged_samples,
               "ahead_of_next_promotion": ahead[:10], "ahead_count": len(ahead),
               "not_on_isr": unheld[:10], "not_on_isr_count": len(unheld)}
    if noun == "reads":
        details.update(judged_by_watermark=marked, past_watermark=past[:10], past_watermark_count=len(past),
                       without_watermark=unmarked)
    if not judged_next and not judged_samples and not ahead and not unheld and not past:
        return unknown(f"no {noun[:-1]} was followed by a promotion from its ISR or by a sample of its replicas",
                       **details)
    return Verdict(not ahead and not unheld and not past, details)


def _judge(history: list[dict], ctx: dict, f: str, why_async: str, why_none: str) -> Verdict:
    """The two checks' common part: sync mode only, every answer placed, then held by the ISR."""
    if ctx.get("replication", "sync") != "sync":
        return unknown(why_async)
    answers, bad = _placed(history, f)
    if f == "pull":              # a row read is a read: held to the same ISR promise
        rows, bad_rows = _placed(history, "pull-rows")
        answers, bad = sorted(answers + rows, key=lambda a: a[0]), bad or bad_rows
    if not answers:
        return unknown(why_none)
    if bad is not None:
        return unknown(f"an answered {f} without its shard, epoch or seq: cannot place it", example=bad)
    what, noun = ("req_id", "acks") if f == "push" else ("op", "reads")
    marks = _past_watermark(answers) if f == "pull" else ([], 0, 0)
    return _verdict(*_held_by_isr(history, answers, what), len(answers), noun, *marks)


def acks_durable(history: list[dict], ctx: dict) -> Verdict:
    """In sync mode no ack promised what its ISR did not hold: the next epoch's promotion began at a
    seq at or above it, and no replica still in the ISR reported a lower seq after it."""
    return _judge(history, ctx, "push", "async replication acks before its replicas apply: there is no ISR "
                  "promise to judge", "no push was acknowledged: no promise to judge")


def reads_committed(history: list[dict], ctx: dict) -> Verdict:
    """In sync mode a pull reads only what every in-sync replica applied (a dirty read is one a
    failover can undo): the next epoch's promotion began at a seq at or above the pull's, and no
    replica still in the ISR reported a lower seq after it. Row reads (`pull-rows`) are reads too."""
    return _judge(history, ctx, "pull", "async replication reads before its replicas apply by design: "
                  "monotone-reads reports the reads a failover undid", "no pull was answered: no read to judge")
