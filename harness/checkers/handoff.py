"""handoff-continuity: a key a migration moves arrives whole: value, every optimizer slot, step
count, and the dedup state of the pushes applied to it; so do a table's moved embedding rows
(one digest per table and import over every moved row's id, value, slots and step count).

The migrating audit buckets count pushes, so a hand-off that reset a key's Adam step count or
dropped a slot changed nothing any check looked at (the loss target absorbed the rescaled
updates). Now the source digests each moving key's whole state as it exports it (in the blob:
psnodes/store/moving.py key_digests), and the destination, right after the import is applied,
digests the same keys and checks that it holds every applied range the blob carried; the
destination's `migrate-imported` event records both. Fail closed: a migration that switched with
no import record carrying the digests is unknown.
"""
from __future__ import annotations

from pschaos.harness.checkers.base import Verdict, by_f, unknown


COUNTS = ("differ_count", "applied_missing_count")


def handoff_continuity(history: list[dict], ctx: dict) -> Verdict:
    """Every import of a switched migration holds the keys' state as its source exported it, and
    the dedup state that came with them. The coordinator's switch lists the imports it made
    ([from, to, part]); each needs its own record, with both counts: one judged import of a
    migration says nothing of its other sources and parts (review of issue 32, finding 9)."""
    switches = [e["value"] for e in by_f(history, "migration-switch")]
    switched = {v.get("migration") for v in switches}
    imports = [dict(e["value"], node=e.get("node"), t=round(e["t"], 3)) for e in by_f(history, "migrate-imported")]
    judged = [v for v in imports if v.get("digests")]
    # rows moved with no digest of them (a source from before row digests) are not judged
    partial = [{k: v.get(k) for k in ("migration", "part", "from", "shard", "node", "t", "rows")}
               for v in judged if any(v.get(k) is None for k in COUNTS) or (v.get("rows") and not v.get("row_digests"))]
    bad = [{k: v.get(k) for k in ("migration", "part", "from", "shard", "node", "t", "keys", "differ", "differ_count",
                                  "applied_missing", "applied_missing_count")}
           for v in judged if v.get("differ_count") or v.get("applied_missing_count")]
    held = {(v.get("migration"), v.get("from"), v.get("shard"), v.get("part")) for v in judged
            if all(v.get(k) is not None for k in COUNTS)}
    details = {"migrations_switched": len(switched), "imports": len(imports), "imports_judged": len(judged),
               "keys_judged": sum(v.get("keys", 0) for v in judged),
               "rows_judged": sum(v.get("rows", 0) for v in judged if v.get("row_digests")), "broken": bad[:10]}
    if bad:
        return Verdict(False, details)
    if partial:
        return unknown(f"import record(s) without {' or '.join(COUNTS)}, or with rows and no digest of them: "
                       f"{partial[:5]}", **details)
    # each import a switch names, matched by (migration, from, to, part); a switch of an older
    # history names none: any judged import of its migration stands for it, as before
    expected = [(v.get("migration"), a, b, part) for v in switches for a, b, part in v.get("imports") or ()]
    unlisted = {v.get("migration") for v in switches if "imports" not in v}
    missing = sorted({m for m in unlisted if m not in {k[0] for k in held}}, key=str)
    unmatched = [list(k) for k in expected if k not in held]
    if missing or unmatched:
        return unknown(f"migrations switched without a record carrying the keys' digests of every import: "
                       f"{missing + unmatched[:10]}", imports_expected=len(expected), **details)
    if not judged:
        return unknown("no migration imported keys: no hand-off to judge", **details)
    return Verdict(True, {**details, "imports_expected": len(expected)})
