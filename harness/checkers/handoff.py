"""handoff-continuity: a key a migration moves arrives whole: value, every optimizer slot, step
count, and the dedup state of the pushes applied to it.

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


def handoff_continuity(history: list[dict], ctx: dict) -> Verdict:
    """Every import of a switched migration holds the keys' state as its source exported it, and
    the dedup state that came with them."""
    switched = {e["value"].get("migration") for e in by_f(history, "migration-switch")}
    imports = [dict(e["value"], node=e.get("node"), t=round(e["t"], 3)) for e in by_f(history, "migrate-imported")]
    judged = [v for v in imports if v.get("digests")]
    bad = [{k: v.get(k) for k in ("migration", "part", "from", "shard", "node", "t", "keys", "differ", "differ_count",
                                  "applied_missing", "applied_missing_count")}
           for v in judged if v.get("differ_count") or v.get("applied_missing_count")]
    seen = {v.get("migration") for v in judged}
    details = {"migrations_switched": len(switched), "imports": len(imports), "imports_judged": len(judged),
               "keys_judged": sum(v.get("keys", 0) for v in judged), "broken": bad[:10]}
    if bad:
        return Verdict(False, details)
    missing = sorted(m for m in switched if m not in seen)
    if missing:
        return unknown(f"migrations {missing} switched without an import record carrying the keys' digests",
                       **details)
    if not judged:
        return unknown("no migration imported keys: no hand-off to judge", **details)
    return Verdict(True, details)
