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
together: the sum of the per-owner hashes is placement-free.

The audit tensors are left out: they count deliveries, not model updates. A shard's pinned one
(`__audit__/<s>`, the pushes it applied) depends on placement by design. A migrating bucket
(`__audit__/m<b>`) gains 1 per push part its owner applies, and at a switch one step's push may
reach a moved bucket twice (its old owner applied a push before the fence, another shard's
rejected push was split and its part carried the bucket to the new owner) or not at all: its
count depends on how the switch fell between the step's pushes (scale-out-one-worker-transparent
on processes, seed 1, 2026-12-06: the four buckets moving from shard 1 to 2 counted one more
than the fault-free run, every model key equal). That every acknowledged delivery survived the
moves is no-lost-acks' to judge, from those counts (harness/checkers/acks.py).
"""
from __future__ import annotations

from pschaos.harness.checkers.base import Verdict, by_f, unknown

MIGRATIONS = ("scale-out-shards", "scale-in-shards")


def model_of(history: list[dict]) -> tuple[dict | None, str]:
    """The model a run ends with: {"dense": {name: crc}, "rows": {table: hash}, "steps": [...]},
    from one primary per shard of its last routing (each name from the shard that owns it, each
    table's rows from their owners), or None and why it cannot be told."""
    from pschaos.harness.checkers.ownership import belongs, shard_sets

    final, _, _ = shard_sets(history)
    if final is None:
        return None, "run-start names no cluster.shards"
    prim: dict[int, list[dict]] = {}
    for e in by_f(history, "final-state"):
        v = e["value"]
        if v.get("alive") and v.get("role") == "primary" and int(v["shard"]) in final:
            prim.setdefault(int(v["shard"]), []).append(v)
    dense: dict[str, int] = {}
    rows: dict[str, int] = {}
    for s in final:
        if len(prim.get(s, [])) != 1:
            return None, f"shard {s} ended with {len(prim.get(s, []))} answering primaries, not one"
        v = prim[s][0]
        held = v.get("holdings") or {}
        if "digests" not in held or tuple(held.get("under", ())) != final:
            return None, f"{v['node']} reported no state digests under the last routing {list(final)}"
        dense.update({n: crc for n, crc in held["digests"].items() if belongs(n, final) == s})
        for table, per in (held.get("row_digests") or {}).items():
            rows[table] = (rows.get(table, 0) + int(per.get(str(s), "0"), 16)) % (1 << 64)
    steps = sorted(int(e["value"].get("steps", e["value"].get("step", 0)) or 0) for e in by_f(history, "train-done"))
    return {"dense": dense, "rows": {t: f"{h:016x}" for t, h in rows.items()}, "steps": steps}, ""


def disturbed(history: list[dict]) -> str:
    """What besides the migration may have changed what was applied ('' when nothing did): a failed
    or retried step, a failover, a restore."""
    if by_f(history, "train-error"):
        return "a worker's step failed (train-error)"
    if any(not e["value"].get("bootstrap") and int(e["value"].get("epoch", 1)) > 1 for e in by_f(history, "promote")):
        return "a failover happened"
    if by_f(history, "restore"):
        return "a shard was restored from checkpoint"
    return ""


def migration_transparent(history: list[dict], ctx: dict) -> Verdict:
    """A run whose only faults are migrations ends with the same model, bit for bit, as the same run without them."""
    from pschaos.psnodes.placement import is_audit

    start = by_f(history, "run-start")
    cluster = (start[0]["value"].get("cluster") or {}) if start else {}
    if cluster.get("workers") != 1:
        return unknown(f"{cluster.get('workers')} workers: their pushes interleave differently from run to run, "
                       "so two runs need not end bit-identical; judge it with one worker")
    kinds = {e["value"].get("kind") for e in by_f(history, "fault-start")}
    if not kinds & set(MIGRATIONS) or not by_f(history, "migration-switch"):
        return unknown("no migration switched: nothing to be transparent about")
    others = sorted(k for k in kinds - set(MIGRATIONS) if k)
    if others:
        return unknown(f"faults other than migrations ran ({', '.join(others)}): they may change what is applied")
    why = disturbed(history)
    if why:
        return unknown(f"{why}: what was applied may differ from the fault-free run for that reason alone")
    base = ctx.get("baseline_model")
    if not base:
        return unknown(ctx.get("baseline_model_why") or "no fault-free run's model to compare with")
    got, why = model_of(history)
    if got is None:
        return unknown(why)
    if got["steps"] != base.get("steps"):
        return unknown(f"the workers finished {got['steps']} steps, the fault-free run {base.get('steps')}")
    names = {n for n in set(got["dense"]) | set(base["dense"]) if not is_audit(n)}     # deliveries, not model
    if not names:
        return unknown("neither run's final states hold a model key (only audit counts): nothing to compare")
    differ = sorted(n for n in names if got["dense"].get(n) != base["dense"].get(n))
    tables = sorted(t for t in set(got["rows"]) | set(base["rows"]) if got["rows"].get(t) != base["rows"].get(t))
    return Verdict(not differ and not tables, {"dense_keys": len(got["dense"]), "differ": differ[:10],
                                               "differ_count": len(differ), "tables_differ": tables})
