"""Checks of elastic shards: one owner per key and routing epoch; moved keys lost nothing.

`single-owner`: every acknowledged push names the routing epoch it was acked in and the shard
that acked it (psnodes' PushReply.routing_epoch); per dense key and routing epoch at most one
shard may have acked it. A push ack without a routing epoch is no evidence: the check is then
unknown (fail closed), never a pass.

The oracle for moved keys is the migrating audit buckets (`__audit__/m<b>`, pschaos.psnodes.placement):
each is placed like any dense key, so it moves with migrations, and every push adds +1 at its
worker's slot on each bucket its shard owns. A bucket's count on its final owner must cover every
distinct acknowledged push that carried it, whichever shard acked it in whichever routing epoch:
`bucket_shortfalls` is what no-lost-acks adds to its pinned-audit evidence. Shards a scale-in
retired are judged by the final states recorded as they stopped (`retired-state`).
"""
from __future__ import annotations

from collections import defaultdict

from pschaos.harness.checkers.base import Verdict, by_f, final_states, idem, op_key, unknown

BUCKET = "__audit__/m"


def retired_copies(history: list[dict]) -> dict[int, list[dict]]:
    """shard -> the states of its copies as recorded when a scale-in stopped its group."""
    out: dict[int, list[dict]] = defaultdict(list)
    for e in by_f(history, "retired-state"):
        v = e["value"]
        if v.get("alive"):
            out[v["shard"]].append(v)
    return out


def identity(v: dict) -> tuple:
    """A push's idempotency identity across shards: process, key, origin numbering, the re-routed
    part (the shards it was split to; two parts of one push are two identities), request id."""
    return (v.get("pid"), f"{v['worker']}#{v.get('incarnation', 0)}", v.get("origin", v["shard"]),
            tuple(v.get("part", ())), v["req_id"])


def single_owner(history: list[dict], ctx: dict) -> Verdict:
    """One acking shard per key and routing epoch, judged against the migrations' timeline (a
    node's own routing_epoch label alone is a tautology: every node computes the same owner from
    it). For every switched migration E -> E+1 and every source shard a, no ack by a of a key
    moving out of a (src -> dst) may come after a's fence point: a seq above the seq its FENCE
    entry was replicated at (`migrate-fenced`, in that primary epoch or a later one), or a push
    invoked after the switch. An ack labelled with a routing epoch whose shard set is known must
    come from that set's owner. A switched migration whose fence point of some source is missing,
    or one fenced but neither switched nor aborted, is unknown (fail closed)."""
    oks = [e for e in by_f(history, "push", "ok")]
    if not oks:
        return unknown("no push was acknowledged: no ownership to judge")
    missing = [e["value"] for e in oks if "routing_epoch" not in e["value"] or "shard" not in e["value"]]
    if missing:
        return unknown(f"{len(missing)} acknowledged pushes carry no routing epoch: the acking shard per "
                       "routing epoch cannot be told", examples=[{k: v.get(k) for k in ("worker", "req_id", "shard")}
                                                                 for v in missing[:5]])
    owners: dict[tuple[str, int], set[int]] = defaultdict(set)
    for e in oks:
        v = e["value"]
        for k in dense_keys(v):
            owners[(k, int(v["routing_epoch"]))].add(int(v["shard"]))
    twice = [{"key": k, "routing_epoch": ep, "shards": sorted(s)} for (k, ep), s in sorted(owners.items())
             if len(s) > 1]
    late, why, figures = timeline_violations(history, oks)
    epochs = sorted({ep for _, ep in owners})
    details = {"keys": len({k for k, _ in owners}), "routing_epochs": epochs, "acks": len(oks),
               "two_owners": twice[:10], "after_fence": late[:10], "violations": len(twice) + len(late), **figures}
    if why and not twice and not late:
        return unknown(why, **details)
    return Verdict(not twice and not late, details)


def dense_keys(v: dict) -> list[str]:
    """The dense keys of an ack (embedding rows are listed by count, not id: their table's buckets judge them)."""
    return [k for k in v.get("keys", ()) if "[" not in k]


def timeline_violations(history: list[dict], oks: list[dict]) -> tuple[list[dict], str, dict]:
    """Acks by a migration's source of a key it was giving away, after its fence point or after the
    switch, and acks by a shard that does not own the key in the routing epoch they name:
    (violations, why the evidence is incomplete or '', figures)."""
    from pschaos.psnodes.core.migration import moving_out, sources
    from pschaos.psnodes.placement import owner, pinned_shard

    starts = {e["value"]["migration"]: e["value"] for e in by_f(history, "migration-start")}
    switch = {e["value"]["migration"]: e for e in by_f(history, "migration-switch")}
    aborted = {e["value"]["migration"] for e in by_f(history, "migration-abort")}
    fenced_rec = {e["value"]["migration"] for e in by_f(history, "migration-fence")}
    points: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
    for e in by_f(history, "migrate-fenced"):
        v = e["value"]
        points[(v["migration"], int(v["shard"]))].append((int(v.get("epoch", 0)), int(v["seq"])))
    invoked = {op_key(e): e["t"] for e in by_f(history, "push", "invoke")}
    shard_sets: dict[int, tuple] = {}
    for mid, st in starts.items():
        shard_sets.setdefault(int(st["routing_epoch"]), tuple(st["src"]))
        if mid in switch:
            shard_sets[int(switch[mid]["value"]["routing_epoch"])] = tuple(st["dst"])
    why, late = [], []
    judged = []
    for mid, st in starts.items():
        if mid not in switch:
            if mid in fenced_rec and mid not in aborted:
                why.append(f"migration {mid} was fenced but neither switched nor aborted in the history")
            continue
        src, dst = st["src"], st["dst"]
        lacking = [a for a in sources(src, dst) if not points.get((mid, a))]
        if lacking:
            why.append(f"migration {mid} switched but the fence point of sources {lacking} is not in the history")
            continue
        judged.append(mid)
        t_switch = switch[mid]["t"]
        for e in oks:
            v = e["value"]
            a = int(v["shard"])
            if a not in src or int(v["routing_epoch"]) > int(st["routing_epoch"]):
                continue
            moved = [k for k in dense_keys(v) if moving_out(k, a, src, dst)]
            if not moved:
                continue
            fence = [seq for ep, seq in points[(mid, a)] if ep <= int(v.get("epoch", 0))]
            t_inv = invoked.get(op_key(e))
            if fence and int(v.get("seq", 0)) > min(fence):
                late.append({"migration": mid, "shard": a, "keys": moved[:5], "seq": v.get("seq"),
                             "fence_seq": min(fence), "req_id": v.get("req_id"), "why": "acked after its fence"})
            elif t_inv is not None and t_inv > t_switch:
                late.append({"migration": mid, "shard": a, "keys": moved[:5], "invoked": t_inv, "switch": t_switch,
                             "req_id": v.get("req_id"), "why": "invoked after the switch"})
    for e in oks:
        v = e["value"]
        shards = shard_sets.get(int(v["routing_epoch"]))
        if shards is None:
            continue
        wrong = [k for k in dense_keys(v) if pinned_shard(k) is None and owner(k, shards) != int(v["shard"])]
        if wrong:
            late.append({"shard": v["shard"], "routing_epoch": v["routing_epoch"], "keys": wrong[:5],
                         "req_id": v.get("req_id"), "why": "not the key's owner in that routing epoch"})
    return late, "; ".join(why), {"migrations_judged": judged}


def bucket_shortfalls(history: list[dict], allowed: set | frozenset = frozenset()) -> tuple[list[dict], dict, str]:
    """Audit buckets whose final count is below the acknowledged pushes that carried them:
    (shortfalls, figures, why the evidence is missing or ''). A bucket's count is read from its
    owner under the final routing only (a primary that still holds a copy it gave away is not its
    owner); a bucket carried by acks whose owner reported no count is missing evidence, not a loss.
    Every (from, to) pair of a switched migration that moved keys must have carried a bucket (the
    bucket's own delta is the pair's proof): a pair without one is missing evidence too. `allowed`:
    the identities of acks the replication mode may lose (async: a failover's unreplicated
    window, as no-lost-acks explains them); their increments are not demanded of any bucket."""
    oks = [e["value"] | {"pid": e.get("pid")} for e in by_f(history, "push", "ok")]
    carried: dict[tuple[str, str], set] = defaultdict(set)
    for v in oks:
        if v.get("applied_as"):     # a duplicate of an ancestor: its increments are the ancestor's, not its own
            continue
        for k in v.get("keys", ()):
            if k.startswith(BUCKET):
                carried[(k, v["worker"])].add(identity(v))
    if not carried:
        return [], {"buckets_checked": 0}, ""
    final = final_bucket_counts(history, {b for b, _ in carried})
    if final is None:
        return [], {"buckets_checked": 0}, "no final primary reported its audit buckets"
    why = []
    unreported = sorted({b for b, _ in carried} - set(final))
    if unreported:
        why.append(f"buckets {unreported} were carried by acks but their final owner reported no count")
    short = []
    for (b, worker), ids in sorted(carried.items()):
        if b not in final:
            continue
        have = int(final[b].get(worker, 0))
        need = len(ids - allowed)
        if have < need:
            short.append({"bucket": b, "worker": worker, "acked": len(ids), "count": have, "owner_reported": True,
                          **({"allowed_lost": len(ids) - need} if need < len(ids) else {})})
    uncovered = uncovered_pairs(history, {b for b, _ in carried})
    if uncovered:
        why.append(f"the moves {uncovered} carried no audit bucket: their deltas were not checked")
    figures = {"buckets_checked": len(final), "bucket_acks": sum(len(i) for i in carried.values()),
               "pairs_uncovered": uncovered}
    return short, figures, "; ".join(why)


def final_bucket_counts(history: list[dict], buckets: set[str]) -> dict[str, dict] | None:
    """Each bucket's per-worker counts as its owner under the final routing reports them (without a
    migration: the count every primary agrees on); None when no final primary reported buckets."""
    from pschaos.psnodes.placement import owner

    routing = final_routing(history)
    reports: dict[str, dict[int, dict]] = defaultdict(dict)
    for st in final_states(history):
        if st.get("alive") and st.get("role") == "primary" and st.get("buckets") is not None:
            for b, counts in st["buckets"].items():
                reports[b][int(st["shard"])] = counts
    if not reports:
        return None
    final: dict[str, dict] = {}
    for b in sorted(buckets):
        got = reports.get(b, {})
        if routing is not None:
            home = owner(b, routing)
            if home in got:
                final[b] = got[home]
        elif len({tuple(sorted(c.items())) for c in got.values()}) == 1:
            final[b] = next(iter(got.values()))
    return final


def bucket_excess(history: list[dict]) -> tuple[list[dict], dict]:
    """Audit buckets whose final count is above the pushes that carried them: a push applied by
    its source before a migration's fence and again by the new owner (its reply lost, its retry
    re-routed) adds two. A logical push is its process, worker, incarnation, the shard its request
    id was numbered for (`origin`) and that id, whatever parts and shards it went to; the bound
    is the invokes, so a push whose every ack was lost still counts (applied <= invoked)."""
    invoked: dict[tuple[str, str], set] = defaultdict(set)
    for e in by_f(history, "push", "invoke"):
        v = e["value"]
        ident = (e.get("pid"), v["worker"], v.get("incarnation", 0), v.get("origin", v["shard"]), v["req_id"])
        for k in v.get("keys", ()):
            if k.startswith(BUCKET):
                invoked[(k, v["worker"])].add(ident)
    if not invoked:
        return [], {"buckets_checked_for_excess": 0}
    final = final_bucket_counts(history, {b for b, _ in invoked}) or {}
    if not final:
        return [], {"buckets_checked_for_excess": 0,
                    "excess_unjudged": "pushes carried migrating buckets but no final owner reported a count"}
    over = [{"bucket": b, "worker": w, "count": int(final[b][w]), "invoked": len(ids)}
            for (b, w), ids in sorted(invoked.items()) if b in final and int(final[b].get(w, 0)) > len(ids)]
    figures: dict = {"buckets_checked_for_excess": len(final)}
    unreported = sorted({b for b, _ in invoked} - set(final))
    if unreported:     # skipped, they passed: as bucket_shortfalls says of the same buckets
        figures["excess_unjudged"] = (f"buckets {unreported[:10]} were carried by pushes but their final owner "
                                      "reported no count")
    return over, figures


def final_routing(history: list[dict]) -> tuple[int, ...] | None:
    """The shard set of the last switched migration (None: no migration switched)."""
    sw = by_f(history, "migration-switch")
    return tuple(sw[-1]["value"]["shards"]) if sw and "shards" in sw[-1]["value"] else None


def uncovered_pairs(history: list[dict], buckets: set[str]) -> list[list]:
    """[migration, from, to] for each pair of a switched migration that moved keys of the run (its
    acked dense keys, or rows of its tables: rendezvous moves rows on every pair into a new shard or
    out of a removed one) but no audit bucket the acks carried."""
    from pschaos.psnodes.placement import owner, pinned_shard

    starts = {e["value"]["migration"]: e["value"] for e in by_f(history, "migration-start")}
    keys, tables = set(), False
    for e in by_f(history, "push", "ok"):
        for k in e["value"].get("keys", ()):
            if "[" in k:
                tables = True
            elif pinned_shard(k) is None and not k.startswith(BUCKET):
                keys.add(k)
    out = []
    for e in by_f(history, "migration-switch"):
        st = starts.get(e["value"]["migration"])
        if st is None:
            continue
        src, dst = tuple(st["src"]), tuple(st["dst"])
        moved = {(owner(k, src), owner(k, dst)) for k in keys} | \
            ({(a, b) for a in src for b in dst if a != b and not (a in dst and b in src)} if tables else set())
        covered = {(owner(b, src), owner(b, dst)) for b in buckets}
        out += [[st["migration"], a, b] for a, b in sorted(moved) if a != b and (a, b) not in covered]
    return out


def applied_anywhere(history: list[dict]) -> dict[str, list[list[int]]]:
    """Every final and retired primary's applied ranges, by fully qualified key (`w#inc@shard`):
    where a duplicate answered from a migrated applied set (applied_on) is looked up."""
    out: dict[str, list] = defaultdict(list)
    states = [s for s in final_states(history) if s.get("alive")] + \
        [c for cs in retired_copies(history).values() for c in cs]
    for s in states:
        if s.get("role") != "primary":
            continue
        for k, rs in (s.get("applied") or {}).items():
            out[k if "@" in k else f"{k}@{s['shard']}"] += rs
    return out


def fq(v: dict) -> str:
    """The fully qualified applied key of an ack (`worker#inc@origin`)."""
    key = idem(v)
    return key if "@" in key else f"{key}@{v.get('applied_on', v['shard'])}"


def migration_metrics(history: list[dict]) -> dict:
    """The metrics of a run's migrations: how many switched or aborted, the bytes shipped against
    the moved keys' bytes, the fraction of the model's keys that moved, and how long the moved keys
    could not be written: from the fence to the first ack of a moved key at the new routing epoch
    (what a client saw; a migration with no such ack is counted as unobserved, not filled in), and
    apart from it the coordinator's fence -> switch (`migration_fenced_ms`)."""
    from pschaos.psnodes.placement import owner, pinned_shard
    from pschaos.reports.percentiles import failover_stats

    done = [e["value"] for e in by_f(history, "migration-done")]
    fences = {e["value"]["migration"]: e["t"] for e in by_f(history, "migration-fence")}
    starts = {e["value"]["migration"]: e["value"] for e in by_f(history, "migration-start")}
    oks = sorted(by_f(history, "push", "ok"), key=lambda e: e["t"])
    keys = sorted({k for e in oks for k in e["value"].get("keys", ()) if "[" not in k and pinned_shard(k) is None
                   and not k.startswith(BUCKET)})
    fractions, unavailable, fenced = [], [], []
    for e in by_f(history, "migration-switch"):
        v = e["value"]
        st = starts.get(v["migration"])
        if st is None:
            continue
        moved = {k for k in keys if owner(k, st["src"]) != owner(k, st["dst"])}
        if keys:
            fractions.append(len(moved) / len(keys))
        t_fence = fences.get(v["migration"])
        first = next((o["t"] for o in oks if t_fence is not None and o["t"] > t_fence
                      and o["value"].get("routing_epoch", 0) >= v["routing_epoch"]
                      and moved & set(o["value"].get("keys", ()))), None)
        if first is not None:
            unavailable.append(round((first - t_fence) * 1000, 2))
        if v.get("fenced_ms") is not None:
            fenced.append(float(v["fenced_ms"]))
    shipped, key_bytes = sum(d["bytes"] for d in done), sum(d["key_bytes"] for d in done)
    return {"migrations": len(by_f(history, "migration-switch")),
            "migration_aborts": len(by_f(history, "migration-abort")),
            "migration_bytes": shipped, "moved_key_bytes": key_bytes,
            "migration_bytes_ratio": round(shipped / key_bytes, 3) if key_bytes else None,
            "keys_moved_fraction": round(sum(fractions) / len(fractions), 4) if fractions else None,
            # what clients saw (the fence to the first ack of a moved key at the new epoch), apart from
            # the coordinator's own fence -> switch: two different clocks of one event, never pooled
            "migration_unavailable_ms": failover_stats(unavailable) if unavailable else
            {"p50": None, "p99": None, "max": None, "n": 0},
            "migration_unavailable_unobserved": len(by_f(history, "migration-switch")) - len(unavailable),
            # the values behind the figure, so a soak pools them across seeds (a p99 of p99s is no p99)
            "migration_unavailable_samples_ms": unavailable,
            "migration_fenced_ms": failover_stats(fenced) if fenced else {"p50": None, "p99": None, "max": None, "n": 0}}
