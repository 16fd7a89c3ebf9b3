"""At most one acking primary per shard and epoch; epochs strictly rising."""
from __future__ import annotations

from .base import Verdict, by_f


def single_primary(history: list[dict], ctx: dict) -> Verdict:
    nodes: dict[tuple[int, int], set[str]] = {}
    last_epoch: dict[int, int] = {}
    regressions = []
    for e in by_f(history, "promote"):
        v = e["value"]
        nodes.setdefault((v["shard"], v["epoch"]), set()).add(v["node"])
        if v["epoch"] <= last_epoch.get(v["shard"], 0):
            regressions.append({"shard": v["shard"], "epoch": v["epoch"], "after": last_epoch[v["shard"]],
                                "t": e["t"]})
        last_epoch[v["shard"]] = max(v["epoch"], last_epoch.get(v["shard"], 0))
    for e in by_f(history, "push", "ok"):
        v = e["value"]
        nodes.setdefault((v["shard"], v["epoch"]), set()).add(v["node"])
    split = {f"shard {s} epoch {ep}": sorted(n) for (s, ep), n in nodes.items() if len(n) > 1}
    return Verdict(not split and not regressions, {
        "epochs": {str(s): max(ep for (sh, ep) in nodes if sh == s) for s in {k[0] for k in nodes}},
        "split_brain": split, "epoch_regressions": regressions})
