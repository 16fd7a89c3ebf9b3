"""Where a migration's write unavailability goes: its hand-off split into phases, from a history.

`migration_unavailable_ms` (harness/checkers/migration.py) is one number, the fence to the first
ack of a moved key at the new routing epoch. To say which part of it the twin gets wrong, both
backends' histories are cut at the same events (the coordinator's, psnodes/elastic/migration.py, the
sources' `migrate-fenced`, the workers' push events):

- fence_cas: copy end -> `migration-fence` (the record's compare-and-swap to phase fenced);
- fence_calls: `migration-fence` -> the last source's `migrate-fenced` (a FENCE Migrate per source);
- delta: -> `migration-handoff` (an EXPORT and an IMPORT per pair that carried keys);
- switch_cas: -> `migration-switch` (the compare-and-swap to the new routing epoch);
- switch_to_ack: -> the first ack of a moved key at the new epoch (the clients' StaleRouting retry
  pacing, their routing re-read and the re-routed push);
- unavailable: the metric's own span (the sum of the above from the fence on).

And the per-call latency of the workers' pushes and pulls (invoke -> ok, by op id): the hand-off
is a chain of such calls, so a twin whose calls are faster than real ones predicts a shorter
hand-off even when every phase runs the same steps. All figures in ms; None where an event is
missing (an aborted migration has no switch), never a filled-in value.
"""
from __future__ import annotations

import statistics

PHASES = ("fence_cas", "fence_calls", "delta", "switch_cas", "switch_to_ack", "unavailable")


def _first(history: list[dict], f: str, mid: str) -> float | None:
    return next((e["t"] for e in history if e["f"] == f and e["value"].get("migration") == mid), None)


def _ms(a: float | None, b: float | None) -> float | None:
    return round((b - a) * 1000, 2) if a is not None and b is not None else None


def handoff_phases(history: list[dict]) -> list[dict]:
    """One dict per switched migration: its id and each of PHASES in ms (None where unobserved)."""
    from pschaos.psnodes.placement import owner, pinned_shard

    oks = sorted((e for e in history if e["f"] == "push" and e["type"] == "ok"), key=lambda e: e["t"])
    keys = {k for e in oks for k in e["value"].get("keys", ())
            if "[" not in k and pinned_shard(k) is None and not k.startswith("__audit__/")}
    starts = {e["value"]["migration"]: e["value"] for e in history if e["f"] == "migration-start"}
    out = []
    for sw in (e for e in history if e["f"] == "migration-switch"):
        mid, epoch = sw["value"]["migration"], sw["value"]["routing_epoch"]
        st = starts.get(mid)
        fence = _first(history, "migration-fence", mid)
        fenced = [e["t"] for e in history if e["f"] == "migrate-fenced" and e["value"].get("migration") == mid
                  and fence is not None and e["t"] >= fence]
        last_fenced = max(fenced) if fenced else None
        moved = {k for k in keys if owner(k, st["src"]) != owner(k, st["dst"])} if st else set()
        ack = next((o["t"] for o in oks if fence is not None and o["t"] > fence
                    and o["value"].get("routing_epoch", 0) >= epoch and moved & set(o["value"].get("keys", ()))), None)
        handoff = _first(history, "migration-handoff", mid)
        out.append({"migration": mid,
                    "fence_cas": _ms(_first(history, "migration-copy-end", mid), fence),
                    "fence_calls": _ms(fence, last_fenced),
                    "delta": _ms(last_fenced, handoff),
                    "switch_cas": _ms(handoff, sw["t"]),
                    "switch_to_ack": _ms(sw["t"], ack),
                    "unavailable": _ms(fence, ack)})
    return out


def call_latency(history: list[dict]) -> dict[str, float | None]:
    """The median invoke -> ok time of the workers' pushes and pulls (ms), matched by op id."""
    began: dict[tuple, float] = {}
    took: dict[str, list[float]] = {"push": [], "pull": []}
    for e in history:
        if e["f"] not in took or e.get("op_id") is None:
            continue
        k = (e["f"], e["node"], e["op_id"])
        if e["type"] == "invoke":
            began[k] = e["t"]
        elif e["type"] == "ok" and k in began:
            took[e["f"]].append(e["t"] - began.pop(k))
    return {f"{f}_p50_ms": round(statistics.median(xs) * 1000, 3) if xs else None for f, xs in took.items()}


def median_phases(runs: list[list[dict]]) -> dict[str, float | None]:
    """Each phase's median over every migration of every run (runs: handoff_phases of each)."""
    out = {}
    for p in PHASES:
        xs = [m[p] for ms in runs for m in ms if m.get(p) is not None]
        out[p] = round(statistics.median(xs), 2) if xs else None
    return out


__all__ = ["PHASES", "call_latency", "handoff_phases", "median_phases"]
