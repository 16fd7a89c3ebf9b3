"""migration-transparent: a run whose only faults are shard migrations ends with the very model
the same run without them ends with, bit for bit.

handoff-continuity compares each moved key's state at the hand-off; this compares the end: any
update a migration lost, doubled or applied to a reset state (an Adam step count started over at
the destination) leaves a trace in the final values. Only where training is deterministic: one
worker (two workers' pushes interleave differently run to run) and no fault but migrations (a
failover or a restore changes what is applied). The model is the union over each shard's primary
of its holdings' state digests (psnodes/store/holdings.py: per dense name a CRC-32 of value,
slots and steps; per table an order-free hash of its rows' ids, values, slots and steps), taken
from the run's final states and from the fault-free run's (`ctx["baseline_model"]`, which the
psnodes adapter reads from the baseline's history). Rows are compared per table over all owners
together: the sum of the per-owner hashes is placement-free. A shard's pinned audit tensor
(`__audit__/<s>`, its own count of the pushes it applied) depends on placement by design and is
left out; the migrating audit buckets are compared like any key.
"""
from __future__ import annotations

from pschaos.harness.checkers.base import Verdict, by_f, unknown

MIGRATIONS = ("scale-out-shards", "scale-in-shards")


def model_of(states: list[dict]) -> tuple[dict | None, str]:
    """The model the primaries hold at the end: {"dense": {name: crc}, "rows": {table: hash}}, or
    None and why it cannot be told."""
    prim = [v for v in states if v.get("alive") and v.get("role") == "primary"]
    if not prim:
        return None, "no primary's final state was recorded"
    dense: dict[str, int] = {}
    rows: dict[str, int] = {}
    for v in prim:
        held = v.get("holdings") or {}
        if "digests" not in held:
            return None, f"{v['node']} reported no state digests"
        for name, crc in held["digests"].items():
            if name in dense and dense[name] != crc:
                return None, f"two primaries hold {name} with different states"
            dense[name] = crc
        mine = str(v["shard"])
        for table, per in (held.get("row_digests") or {}).items():
            if mine in per:
                rows[table] = (rows.get(table, 0) + int(per[mine], 16)) % (1 << 64)
    return {"dense": dense, "rows": {t: f"{h:016x}" for t, h in rows.items()}}, ""


def migration_transparent(history: list[dict], ctx: dict) -> Verdict:
    """A run whose only faults are migrations ends with the same model, bit for bit, as the same run without them."""
    start = by_f(history, "run-start")
    cluster = (start[0]["value"].get("cluster") or {}) if start else {}
    if cluster.get("workers") != 1:
        return unknown(f"{cluster.get('workers')} workers: their pushes interleave differently from run to run, "
                       "so two runs need not end bit-identical; judge it with one worker")
    kinds = {e["value"].get("kind") for e in by_f(history, "fault-start")}
    if not kinds & set(MIGRATIONS):
        return unknown("no migration ran: nothing to be transparent about")
    others = sorted(k for k in kinds - set(MIGRATIONS) if k)
    if others:
        return unknown(f"faults other than migrations ran ({', '.join(others)}): they may change what is applied")
    base = ctx.get("baseline_model")
    if not base:
        return unknown("no fault-free run's model to compare with (the baseline run failed, or recorded no digests)")
    got, why = model_of([e["value"] for e in by_f(history, "final-state")])
    if got is None:
        return unknown(why)
    from pschaos.psnodes.placement import pinned_shard

    names = {n for n in set(got["dense"]) | set(base["dense"]) if pinned_shard(n) is None}   # a shard's own
    differ = sorted(n for n in names if got["dense"].get(n) != base["dense"].get(n))      # audit is placement
    tables = sorted(t for t in set(got["rows"]) | set(base["rows"]) if got["rows"].get(t) != base["rows"].get(t))
    return Verdict(not differ and not tables, {"dense_keys": len(got["dense"]), "differ": differ[:10],
                                               "differ_count": len(differ), "tables_differ": tables})
