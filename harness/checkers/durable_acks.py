"""acks-durable and reads-committed: in sync mode every acknowledgement is as durable as a first
attempt's, and every read is of state the in-sync replicas hold.

A sync ack promises the entry is on every in-sync replica. no-lost-acks sees a broken promise
only when a failover later loses the entry; an ack answered early (a retry recognised from the
dedup table and acknowledged without waiting for the ISR) can slip through when the failover
comes late or never. So each ack (shard, epoch E, seq S) is held against two records of what
the ISR held, whether or not anything was lost:

- the next epoch's promotion: the copy promoted from E's ISR began at a seq >= S (an epoch that
  began with a restore from checkpoint is losses-accounted's to judge);
- the replicas' own status, sampled by the harness while the run goes: a member of E's ISR at
  the ack, still a member when sampled (by the `isr` and `promote` events) and neither down nor
  restarted in between, never reports a seq below S at epoch E after the ack. Samples within
  SAMPLE_SLACK_S of the ack are not used: the status call may have been answered before the ack.

Every answer must be judged by one of them (or have promised nothing: its ISR was the primary
alone), or the check is unknown and names the answers nothing judged. Two kinds of answer no
sample could reach are counted apart, never a run's only evidence: the run's tail (after the
sampler's last round), and answers whose in-sync replicas all went down before the sampler's
next round (every replica of the shard killed: losses-accounted judges what a restore
declares). The final observation is no evidence: it reads once replication settled.

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

from pschaos.harness.checkers.base import KILLS, Verdict, by_f, unknown, went_down

SAMPLE_SLACK_S = 0.25        # the sampler's status timeout (0.2 s) and then some
TAIL_S = 1.0                 # answers this soon after the sampler's last round: the run's tail
DROP_S = 1.0                 # a copy down this long at a send should have left the ISR (suspect_s
                             # 0.3 s, then the record's compare-and-swap); fault-start is stamped
                             # as the fault is injected, a timed kill's landing later


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


def _readings(history: list[dict]) -> tuple[dict, dict]:
    """(shard, epoch) -> [(t, node, seq)]: the replicas' status as the sampler read it; and node ->
    the times the sampler read it, in any role (its rounds).

    The final observation's reads are no evidence here: it reads once replication settled, when
    every live copy holds the primary's seq, so it cannot see an ack sent before its ISR held the
    entry (hostile review of this check, finding 1)."""
    out: dict[tuple[int, int], list[tuple[float, str, int]]] = defaultdict(list)
    rounds: dict[str, list[float]] = defaultdict(list)
    for e in by_f(history, "sample"):
        v = e["value"]
        if None in (v.get("shard"), v.get("epoch"), v.get("seq"), v.get("node")):
            continue
        rounds[v["node"]].append(e["t"])
        if v.get("role") == "replica":
            out[(v["shard"], v["epoch"])].append((e["t"], v["node"], v["seq"]))
    return out, {k: sorted(ts) for k, ts in rounds.items()}


def _ends(history: list[dict]) -> dict[str, list[float]]:
    """node -> when it went down: a kill of it, a stop of it, a start after its first (a restart)."""
    out: dict[str, list[float]] = defaultdict(list)
    for e in by_f(history, "fault-start"):
        if e["value"].get("kind") in (*KILLS, "stop", "restart") and not e["value"].get("partial"):
            for n, t in went_down(e):
                out[n].append(t)
    for e in by_f(history, "stop"):
        out[e.get("node")].append(e["t"])
    return out


def _held_by_isr(history: list[dict], answers: list[tuple[float, dict]], what: str) -> dict:
    """For each answer (an ack or a read at shard, epoch E, seq S, by node): whether the next
    epoch's promotion began at a seq >= S, and whether a replica still in E's ISR reported a
    lower seq after it (a sample not within SAMPLE_SLACK_S after the answer: the status call may
    have been answered before it; nor from a copy that went down or restarted in between).

    Each answer is counted once by what judged it, or by why nothing could (review of issue 32,
    finding 5: a run passed as soon as any one answer was judged): the run's sampling ended
    before a round could read it (its tail, bounded by TAIL_S), or every copy it promised went
    down before the sampler's next round. Any other answer is unjudged, and named."""
    restored = {(e["value"]["shard"], e["value"].get("epoch")) for e in by_f(history, "restore")}
    promotes = defaultdict(list)          # bootstraps too: a re-added shard's life is not the old one's
    for e in by_f(history, "promote"):
        v = e["value"]
        if "seq" in v:
            promotes[v["shard"]].append(v)
    isr = _isr_timeline(history)
    ends = _ends(history)
    every_start = defaultdict(list)     # restarts: a node's first start (recorded once its start call
    for e in by_f(history, "start"):    # returned, after the first answers) lost nothing it held
        every_start[e.get("node")].append(e["t"])
    starts = {n: [s for i, s in enumerate(sorted(ts)) if i or any(x < s for x in ends.get(n, ()))]
              for n, ts in every_start.items()}
    readings, rounds = _readings(history)
    r = {"ahead": [], "unheld": [], "by_next": 0, "by_replicas": 0, "alone": 0, "gone": [], "tail": [],
         "unjudged": []}
    for t, v in answers:
        shard, epoch, seq = v["shard"], v["epoch"], v["seq"]
        who = {"worker": v.get("worker"), what: v.get("req_id", v.get("op")), "shard": shard, "epoch": epoch,
               "seq": seq, "t": round(t, 4), **({"duplicate": True} if v.get("duplicate") else {})}
        judged = False
        nxt = min((p for p in promotes[shard] if p["epoch"] > epoch), key=lambda p: p["epoch"], default=None)
        if nxt is not None and (shard, nxt["epoch"]) not in restored and not nxt.get("bootstrap"):
            judged = True
            r["by_next"] += 1
            if nxt["seq"] < seq:
                r["ahead"].append({**who, "next_epoch": nxt["epoch"], "promoted_at_seq": nxt["seq"],
                                   "promoted": nxt.get("node")})
        line = isr.get((shard, epoch), [])
        members = _isr_at(line, t) - {v.get("node")}
        if line and line[0][0] <= t and not members:
            judged = True           # the ISR was the primary alone: the ack promised no other copy
            r["alone"] += 1
        sampled = False
        for ts, node, got in readings.get((shard, epoch), ()):
            if node not in members or ts <= t + SAMPLE_SLACK_S:
                continue
            if any(t < s <= ts for s in (*starts.get(node, ()), *ends.get(node, ()))):
                continue            # down or restarted since: it catches up again from its checkpoint
            if node not in _isr_at(line, ts) and got < seq:
                continue            # dropped from the ISR since: it may stay behind by design
            sampled = True          # (one dropped since that holds the entry held it: split-brain-restore)
            if got < seq:
                r["unheld"].append({**who, "replica": node, "replica_seq": got, "sampled_t": round(ts, 4)})
                break
        r["by_replicas"] += sampled
        if judged or sampled:
            continue
        why = _why_unread(members, t, rounds, ends, every_start)
        r[why].append(who)
    return r


def _why_unread(members: frozenset, t: float, rounds: dict, ends: dict, starts: dict) -> str:
    """Why no sample judged an answer at t: "gone" when each copy it promised went down before the
    sampler read it again, "tail" when the sampler's reads of some ended first (the answer within
    TAIL_S of their last, or of the sampler's last round when it made none after the answer: a
    copy that came back into the ISR after that round was never read since its restart, though
    not one already down DROP_S at the answer, which its primary should have dropped) and the
    rest went down, else "unjudged"."""
    if not members:
        return "unjudged"
    last_round = max((ts[-1] for ts in rounds.values() if ts), default=None)
    ended = last_round is not None and last_round <= t + SAMPLE_SLACK_S and t <= last_round + TAIL_S
    down, unread = 0, 0
    for m in members:
        ts = rounds.get(m, [])
        nxt = next((x for x in ts if x > t + SAMPLE_SLACK_S), None)
        if nxt is None and (ts and t <= ts[-1] + TAIL_S or ended and not _dead_at(m, t, ends, starts)):
            unread += 1
        elif nxt is not None and _down_by(m, t, nxt, ends, starts):
            down += 1
        else:
            return "unjudged"
    return "tail" if unread else "gone"


def _dead_at(node: str, t: float, ends: dict, starts: dict) -> bool:
    """Whether `node` was down at `t` for DROP_S or more, not started since (a stale ISR member)."""
    up = max((s for s in starts.get(node, ()) if s <= t), default=float("-inf"))
    return any(up < x <= t - DROP_S for x in ends.get(node, ()))


def _down_by(node: str, t: float, by: float, ends: dict, starts: dict) -> bool:
    """Whether `node` went down after it last came up, no earlier than DROP_S before the answer at
    `t` (a copy down longer and still in the ISR should have been dropped from it: an ack then is
    no excuse, however early its push was first sent) and no later than `by`."""
    up = max((s for s in starts.get(node, ()) if s <= t), default=float("-inf"))
    return any(max(up, t - DROP_S) < x <= by for x in ends.get(node, ()))


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


def _verdict(r: dict, n: int, noun: str, past: list | None = None, marked: int = 0, unmarked: int = 0) -> Verdict:
    """The watermark can fail a read on its own; a pass needs every answer judged by a record the
    node does not write itself (the next promotion, the replicas' readings, an ISR of the primary
    alone): the watermark is the node's own account, and one answer judged is not all of them."""
    past = past or []
    ahead, unheld, unjudged = r["ahead"], r["unheld"], r["unjudged"]
    details = {noun: n, "judged_by_next_promotion": r["by_next"], "judged_by_replicas": r["by_replicas"],
               "isr_was_the_primary_alone": r["alone"], "unjudged_count": len(unjudged), "unjudged": unjudged[:10],
               "isr_went_down_first": len(r["gone"]), "isr_went_down_first_examples": r["gone"][:5],
               "after_the_last_sample": len(r["tail"]),
               "ahead_of_next_promotion": ahead[:10], "ahead_count": len(ahead),
               "not_on_isr": unheld[:10], "not_on_isr_count": len(unheld)}
    if noun == "reads":
        details.update(judged_by_watermark=marked, past_watermark=past[:10], past_watermark_count=len(past),
                       without_watermark=unmarked)
    if ahead or unheld or past:
        return Verdict(False, details)
    if unjudged:
        return unknown(f"{len(unjudged)} of {n} {noun} were judged by no record (no promotion from their ISR "
                       "followed, and no replica still in it was read after them)", **details)
    if not (r["by_next"] or r["by_replicas"] or r["alone"]):
        return unknown(f"none of the {n} {noun} was judged: each came after the sampler's last round or had "
                       "its in-sync replicas go down before the next", **details)
    return Verdict(True, details)


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
    return _verdict(_held_by_isr(history, answers, what), len(answers), noun, *marks)


def acks_durable(history: list[dict], ctx: dict) -> Verdict:
    """In sync mode no ack promised what its ISR did not hold: the next epoch's promotion began at a
    seq at or above it, and no replica still in the ISR reported a lower seq when sampled after
    it. Every ack must be judged so (but those after the sampler's last round, or whose in-sync
    replicas all went down before its next), or the check is unknown and names them."""
    return _judge(history, ctx, "push", "async replication acks before its replicas apply: there is no ISR "
                  "promise to judge", "no push was acknowledged: no promise to judge")


def reads_committed(history: list[dict], ctx: dict) -> Verdict:
    """In sync mode a pull reads only what every in-sync replica applied (a dirty read is one a
    failover can undo): the next epoch's promotion began at a seq at or above the pull's, and no
    replica still in the ISR reported a lower seq after it; every read judged so, or unknown. Row
    reads (`pull-rows`) are reads too."""
    return _judge(history, ctx, "pull", "async replication reads before its replicas apply by design: "
                  "monotone-reads reports the reads a failover undid", "no pull was answered: no read to judge")
