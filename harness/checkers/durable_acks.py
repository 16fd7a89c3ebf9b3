"""acks-durable and reads-committed: in sync mode every acknowledgement is as durable as a first
attempt's, and every read is of state the in-sync replicas hold.

A sync ack promises the entry is on every in-sync replica. no-lost-acks sees a broken promise
only when a failover later loses the entry; an ack answered early (a retry recognised from the
dedup table and acknowledged without waiting for the ISR) can slip through when the failover
comes late or never. So each ack (shard, epoch E, seq S) is held against two records of what
the ISR held, whether or not anything was lost:

- the next epoch's promotion: the copy promoted from E's ISR began at a seq >= S (an epoch that
  began with a restore from checkpoint is losses-accounted's to judge);
- the replicas' own status, sampled by the harness while the run goes, read by the final
  observation once it came to rest, and read from a retired group after its fence: a member of
  E's ISR at the ack, still a member when read (by the `isr` and `promote` events) and not
  restarted in between, never reports a seq below S at epoch E after the ack. Samples within
  SAMPLE_SLACK_S of the ack are not used: the status call may have been answered before the ack.

Every answer must be judged by one of them (or have promised nothing: its ISR was the primary
alone), or the check is unknown and names the answers nothing judged. Answers whose in-sync
replicas all went down before a reading could count (every copy killed: losses-accounted judges
what the restore declares) are counted apart, and are never a run's only evidence.

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

from pschaos.harness.checkers.base import KILLS, Verdict, by_f, unknown, victims

SAMPLE_SLACK_S = 0.25        # the sampler's status timeout (0.2 s) and then some
GONE_S = 1.0                 # an answer whose in-sync replicas all went down this soon after it is
                             # one no reading could judge; later, the sampler owed a reading first


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


def _readings(history: list[dict]) -> tuple[dict, float | None]:
    """(shard, epoch) -> [(t, node, seq, how)]: the replicas' status as the sampler read it
    ("sample"), as the final observation read it ("final") and as a scale-in read a retired
    group after fencing it ("retired"); and when the run came to rest (the first `quiesce`)."""
    out: dict[tuple[int, int], list[tuple[float, str, int, str]]] = defaultdict(list)
    for f, how in (("sample", "sample"), ("final-state", "final"), ("retired-state", "retired")):
        for e in by_f(history, f):
            v = e["value"]
            if v.get("role") == "replica" and v.get("alive", True) \
                    and None not in (v.get("shard"), v.get("epoch"), v.get("seq"), v.get("node")):
                out[(v["shard"], v["epoch"])].append((e["t"], v["node"], v["seq"], how))
    rest = next((e["t"] for e in by_f(history, "quiesce")), None)
    return out, rest


def _after(how: str, t: float, ts: float, rest: float | None, fenced: float | None) -> bool:
    """Whether a reading taken (recorded) at ts shows the state after an answer recorded at t. A
    sample's call may have been answered up to SAMPLE_SLACK_S before it was recorded; the final
    observation's calls all began after the run came to rest; a retired group's were made after
    its fence, and every answer of the group was sent before that fence."""
    if how == "final":
        return rest is not None and t < rest <= ts
    if how == "retired" and fenced is not None and fenced <= ts:
        return True
    return ts > t + SAMPLE_SLACK_S


def _ends(history: list[dict]) -> dict[str, list[float]]:
    """node -> when it went down: a kill of it, a stop of it, a start after its first (a restart)."""
    out: dict[str, list[float]] = defaultdict(list)
    for e in by_f(history, "fault-start"):
        if e["value"].get("kind") in (*KILLS, "stop", "restart") and not e["value"].get("partial"):
            for n in victims(e["value"]):
                out[n].append(e["t"])
    for e in by_f(history, "stop"):
        out[e.get("node")].append(e["t"])
    return out


def _held_by_isr(history: list[dict], answers: list[tuple[float, dict]], what: str) -> dict:
    """For each answer (an ack or a read at shard, epoch E, seq S, by node): whether the next
    epoch's promotion began at a seq >= S, and whether a replica still in E's ISR reported a
    lower seq after it. Each answer is counted once by what judged it; one that nothing judged is
    named (review of issue 32, finding 5: a run passed as soon as any one answer was judged).

    The replicas' readings are the sampler's (not within SAMPLE_SLACK_S after the answer: the
    status call may have been answered before it) and the final observation's, which reads every
    copy after the run came to rest (`quiesce`, recorded once the workers finished): it judges
    every answer before that, however late, so the last answers of a run are judged too."""
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
    readings, rest = _readings(history)
    sent = {e.get("op_id"): e["t"] for f in ("push", "pull", "pull-rows") for e in by_f(history, f, "invoke")}
    fences = defaultdict(list)
    for e in by_f(history, "migrate-fenced"):
        fences[e["value"].get("shard")].append(e["t"])
    r = {"ahead": [], "unheld": [], "by_next": 0, "by_replicas": 0, "alone": 0, "gone": [], "unjudged": []}
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
        if line and not members:
            judged = True           # the ISR was the primary alone: the ack promised no other copy
            r["alone"] += 1
        sampled = False
        for ts, node, got, how in readings.get((shard, epoch), ()):
            fenced = max((f for f in fences.get(shard, ()) if f <= ts), default=None)
            if node not in members or not _after(how, t, ts, rest, fenced) or node not in _isr_at(line, ts):
                continue
            if any(t < s <= ts for s in starts.get(node, ())):
                continue                            # restarted since: it catches up again from its checkpoint
            sampled = True
            if got < seq:
                r["unheld"].append({**who, "replica": node, "replica_seq": got, "sampled_t": round(ts, 4),
                                    **({"read_by": how} if how != "sample" else {})})
                break
        r["by_replicas"] += sampled
        if judged or sampled:
            continue
        if members and all(_down_by(m, sent.get(v.get("op"), t), t + GONE_S, ends, every_start) for m in members):
            r["gone"].append(who)       # every copy it promised went down before a reading could count
        else:
            r["unjudged"].append(who)
    return r


def _down_by(node: str, sent: float, by: float, ends: dict, starts: dict) -> bool:
    """Whether `node` went down after it last came up before `sent` (the answer's send), and no
    later than `by`: down at the send and not back, or killed soon after it."""
    up = max((s for s in starts.get(node, ()) if s <= sent), default=float("-inf"))
    return any(up < x <= by for x in ends.get(node, ()))


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
        return unknown(f"every in-sync replica went down before any of the {n} {noun} could be judged", **details)
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
    seq at or above it, and no replica still in the ISR reported a lower seq after it."""
    return _judge(history, ctx, "push", "async replication acks before its replicas apply: there is no ISR "
                  "promise to judge", "no push was acknowledged: no promise to judge")


def reads_committed(history: list[dict], ctx: dict) -> Verdict:
    """In sync mode a pull reads only what every in-sync replica applied (a dirty read is one a
    failover can undo): the next epoch's promotion began at a seq at or above the pull's, and no
    replica still in the ISR reported a lower seq after it. Row reads (`pull-rows`) are reads too."""
    return _judge(history, ctx, "pull", "async replication reads before its replicas apply by design: "
                  "monotone-reads reports the reads a failover undid", "no pull was answered: no read to judge")
