"""ownership-exact: every copy holds exactly the keys its routing assigns its shard.

Copies are compared with each other elsewhere (replicas-match), which misses what all copies of a
shard got wrong together and, at a seq where they differ, what one kept: a catch-up delta taken
across a migration's switch cannot say that keys left, and a copy restarted across the switch
kept them (the zoo's keys-kept-after-move). Here each copy's own key set (psnodes/store/holdings.py:
its dense names, and its rows per table counted and hashed by owner) is judged against the routing
the *history* names, never the copy's own:

- the shard set: run-start's `cluster.shards` (0..n-1), then each `migration-switch`'s `shards`;
  the last switch's at the end, each switch's in its own `holdings` events;
- a dense name belongs to the shard placement gives it over that set (a pinned audit tensor
  `__audit__/<s>` to s alone, to nobody once s was retired); an embedding row to its
  `row_owners` shard;
- left over: a name, or any row, a copy holds that belongs elsewhere;
- missing: a name that belongs to the copy's shard, that some copy held (at the end or at a
  settled switch) or some push acknowledged, and the copy lacks; and, at the end, owned rows that
  differ (count or id hash) between copies of one shard at one seq;
- stale: at the end, a live copy whose routing epoch is below the last switch's, after the
  cluster settled;
- shrunk: at the end, fewer owned rows of a table than a copy of the shard held at a reading after
  the last switch (owned rows are only ever added while a routing stands).

Judged at the end (`final-state`, the observer's reading of the routing record in `under`) and
after each switched migration (`holdings`, recorded once each live copy of the new shard set
applied the switch; `holdings-read` names the copies read, down and still behind). Fail closed,
unknown: no shard set in run-start; a switched migration with no reading after it, or a shard of
its new set none of whose copies was read; at the end a copy that ran but did not answer, one
behind the last switch while the cluster had not settled, one still fenced, holdings missing or
read under another shard set than the history's, or a shard none of whose copies was judged.
"""
from __future__ import annotations

from collections import defaultdict

from pschaos.harness.checkers.base import Verdict, by_f, unknown
from pschaos.harness.checkers.migration import dense_keys

EXAMPLES = 10


def belongs(name: str, shards: tuple[int, ...]) -> int | None:
    """The shard a dense name belongs to over `shards` (None: to none, a retired shard's pinned audit)."""
    from pschaos.psnodes.placement import owner, pinned_shard

    pin = pinned_shard(name)
    if pin is not None:
        return pin if pin in shards else None
    return owner(name, shards)


def shard_sets(history: list[dict]) -> tuple[tuple[int, ...] | None, int, dict[str, tuple[int, tuple[int, ...]]]]:
    """(the final shard set, its routing epoch, migration id -> (routing epoch, shard set) per switch)."""
    start = by_f(history, "run-start")
    n = ((start[0]["value"].get("cluster") or {}).get("shards") if start else None)
    final = tuple(range(int(n))) if n else None
    epoch, switches = 0, {}
    for e in by_f(history, "migration-switch"):
        v = e["value"]
        ep, shards = int(v["routing_epoch"]), tuple(sorted(int(s) for s in v["shards"]))
        switches[v["migration"]] = (ep, shards)
        if ep >= epoch:
            epoch, final = ep, shards
    return final, epoch, switches


def universe(history: list[dict], readings: list[dict]) -> set[str]:
    """Every dense name the run shows to exist: held by a copy in any reading, or acknowledged."""
    names = {n for r in readings for n in (r.get("holdings") or r).get("dense", ())}
    for e in by_f(history, "push", "ok"):
        names.update(dense_keys(e["value"]))
    return names


def judge_copy(node: str, shard: int, held: dict, shards: tuple[int, ...], names: set[str], when: str) -> list[dict]:
    """What one copy's holdings break: names and rows left over, owned names missing."""
    out = []
    dense = set(held.get("dense", ()))
    extra = sorted(n for n in dense if belongs(n, shards) != shard)
    if extra:
        out.append({"node": node, "when": when, "why": "holds dense keys another shard owns (or none does)",
                    "keys": extra[:EXAMPLES], "count": len(extra),
                    "owners": {n: belongs(n, shards) for n in extra[:EXAMPLES]}})
    lacking = sorted(n for n in names if belongs(n, shards) == shard and n not in dense)
    if lacking:
        out.append({"node": node, "when": when, "why": "lacks dense keys its shard owns",
                    "keys": lacking[:EXAMPLES], "count": len(lacking)})
    for table, per in sorted((held.get("rows") or {}).items()):
        stray = {o: cnt for o, (cnt, _h) in per.items() if o != str(shard) and cnt}
        if stray:
            out.append({"node": node, "when": when, "why": "holds embedding rows other shards own",
                        "table": table, "rows_by_owner": stray})
    return out


def ownership_exact(history: list[dict], ctx: dict) -> Verdict:
    """Every copy holds exactly the keys and rows its shard owns under the routing the history names, at the end and after each switch: none left over, none missing."""
    final, epoch, switches = shard_sets(history)
    if final is None:
        return unknown("run-start names no cluster.shards: the shard set keys are placed over is not known")
    states = [e["value"] for e in by_f(history, "final-state")]
    if not any(v.get("alive") for v in states):
        return unknown("no live copy's final state was recorded: nothing to judge")
    settled = [e["value"] for e in by_f(history, "holdings")]
    readings = [v for v in states if v.get("alive") and v.get("holdings")] + settled
    names = universe(history, readings)
    why, violations = after_switches(switches, settled, by_f(history, "holdings-read"), names)
    quiet = last_quiesce(history)
    end = judge_end(states, final, epoch, names, quiet, why)
    violations += end.pop("violations")
    owned = end.pop("owned")
    if quiet:        # a copy still catching up holds fewer rows for a while: no evidence of a loss
        turnover: dict[int, float] = {}
        for e in by_f(history, "promote") + by_f(history, "restore"):
            s = e["value"].get("shard")
            if s is not None:
                turnover[int(s)] = max(turnover.get(int(s), 0.0), e["t"])
        # a reading before a failover or a restore may count rows a failover legitimately lost
        kept = [v for e, v in zip(by_f(history, "holdings"), settled) if e["t"] > turnover.get(int(v["shard"]), -1.0)]
        violations += rows_shrank(kept, owned, final)
    details = {"shards": list(final), "routing_epoch": epoch, "dense_names": len(names),
               "settled_readings": len(settled), **end, "violations": violations[:EXAMPLES], "count": len(violations)}
    if why and not violations:
        return unknown("; ".join(why[:5]), **details)
    return Verdict(not violations, details)


def last_quiesce(history: list[dict]) -> bool:
    """Whether the last settle before the final reading saw the cluster settled (none: it did not look)."""
    q = by_f(history, "quiesce")
    return bool(q) and bool(q[-1]["value"].get("settled"))


def after_switches(switches: dict, settled: list[dict], reads: list[dict], names: set[str]) -> tuple[list, list]:
    """Each switched migration's readings, judged under its own shard set; why evidence is short."""
    why, violations = [], []
    summary = {e["value"]["migration"]: e["value"] for e in reads}
    for mid, (ep, shards) in sorted(switches.items()):
        if mid not in summary:
            why.append(f"migration {mid} switched to routing epoch {ep} but no copy's holdings were read after it")
            continue
        got = {int(v["shard"]) for v in settled if v["migration"] == mid}
        for s in shards:
            if s not in got:
                r = summary[mid]
                why.append(f"no copy of shard {s} was read after migration {mid} (down {r.get('down')}, "
                           f"behind after {r.get('wait_s')} s {r.get('behind')})")
    for v in settled:
        ep, shards = switches.get(v["migration"], (None, None))
        if shards is None or tuple(v.get("under", ())) != shards:
            why.append(f"{v['node']}'s holdings after migration {v['migration']} were read under shards "
                       f"{v.get('under')}, not the switch's {list(shards) if shards else None}")
            continue
        violations += judge_copy(v["node"], int(v["shard"]), v, shards, names, f"after {v['migration']}")
    return why, violations


def judge_end(states: list[dict], final: tuple[int, ...], epoch: int, names: set[str], quiet: bool,
              why: list[str]) -> dict:
    """The final readings: every shard of the last routing judged by at least one copy; a running
    copy that did not answer, one behind the switch while the cluster had not settled, a fence
    still up or holdings read under another shard set leave the check unknown (`why`)."""
    violations, outside, down = [], [], []
    owned: dict[int, dict[int, list[tuple[str, dict]]]] = defaultdict(lambda: defaultdict(list))
    for v in states:
        node, shard, held = v["node"], int(v["shard"]), v.get("holdings")
        if shard not in final:
            outside.append(node)
            continue
        if not v.get("alive"):
            (why.append(f"{node} was running but did not answer its final Status") if v.get("running")
             else down.append(node))
            continue
        if int(v.get("routing_epoch", 0)) < epoch:
            if quiet:        # settled, yet behind the switch
                violations.append({"node": node, "when": "end", "why": "never applied the last switch",
                                   "routing_epoch": v.get("routing_epoch"), "switched_to": epoch})
            else:
                why.append(f"{node} was still at routing epoch {v.get('routing_epoch')} (the last switch is "
                           f"{epoch}) and the cluster had not settled: its keys cannot be judged")
            continue
        if v.get("fence"):
            why.append(f"{node} was still fenced for migration {v['fence']} at the end")
            continue
        if held is None:
            why.append(f"{node} reported no holdings (a copy from before ownership-exact, or a Status that left "
                       "them out)")
            continue
        if tuple(held.get("under", ())) != final:
            why.append(f"{node}'s holdings were read under shards {held.get('under')}, the history's last "
                       f"routing is {list(final)}")
            continue
        violations += judge_copy(node, shard, held, final, names, "end")
        owned[shard][int(v.get("seq", 0))].append((node, held.get("rows") or {}))
    for s in final:
        if s not in owned:
            why.append(f"no copy of shard {s} was judged at the end")
    violations += rows_disagree(owned)
    return {"violations": violations, "owned": owned, "copies_judged": sum(len(c) for x in owned.values() for c in x.values()),
            "down_at_end": down, "outside_shard_set": outside}


def rows_shrank(settled: list[dict], owned: dict, final: tuple[int, ...]) -> list[dict]:
    """Owned rows are never dropped while the routing stands (only a switch moves them), so a copy's
    owned count per table at the end is at least what any copy of its shard held at a reading
    after the last switch: fewer rows means rows went missing. Judged only once the cluster
    settled, and only against readings after the shard's last promotion or restore."""
    out = []
    for v in settled:
        if tuple(v.get("under", ())) != final:
            continue
        shard = int(v["shard"])
        for table, per in (v.get("rows") or {}).items():
            before = int((per.get(str(shard)) or [0])[0])
            for copies in owned.get(shard, {}).values():
                for node, rows in copies:
                    now = int(((rows.get(table) or {}).get(str(shard)) or [0])[0])
                    if now < before:
                        out.append({"node": node, "when": "end", "table": table, "why": "holds fewer owned rows "
                                    f"than {v['node']} did after {v['migration']}", "rows": now, "before": before})
    return out


def rows_disagree(owned: dict[int, dict[int, list[tuple[str, dict]]]]) -> list[dict]:
    """Copies of one shard at one seq whose owned rows differ (count or id hash): one lacks rows."""
    out = []
    for shard, by_seq in sorted(owned.items()):
        for seq, copies in sorted(by_seq.items()):
            tables = {t for _, rows in copies for t in rows}
            for t in sorted(tables):
                seen = {n: tuple((rows.get(t) or {}).get(str(shard), (0, "0" * 16))) for n, rows in copies}
                if len(set(seen.values())) > 1:
                    out.append({"shard": shard, "seq": seq, "when": "end", "table": t,
                                "why": "copies at one seq hold different owned rows",
                                "rows": {n: list(c) for n, c in seen.items()}})
    return out
