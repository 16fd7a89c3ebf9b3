"""What workers read: deltas are complete, reads never go back, staleness stays bounded."""
from __future__ import annotations

from .base import Verdict, by_f


def delta_complete(history: list[dict], ctx: dict) -> Verdict:
    """Every dense key an acked push changed after a pull's cursor (since, seq] is in that pull.

    Only pushes acked before the pull was invoked and at the pull's epoch are held against it:
    those are certainly in the state it read.
    """
    invoked = {e["op_id"]: e["t"] for e in by_f(history, "pull", "invoke") if "op_id" in e}
    acks = sorted(((e["t"], e["value"]) for e in by_f(history, "push", "ok")), key=lambda a: a[0])
    missing, checked = [], 0
    for e in by_f(history, "pull", "ok"):
        v = e["value"]
        t_inv = invoked.get(e.get("op_id"), e["t"])
        keys = set(v["keys"])
        for t, p in acks:
            if t >= t_inv:
                break
            if p["shard"] != v["shard"] or p["epoch"] != v["epoch"] or not v["since"] < p["seq"] <= v["seq"]:
                continue
            checked += 1
            lost = [k for k in p.get("keys", []) if "[" not in k and k not in keys]
            if lost:
                missing.append({"pull": e.get("op_id"), "worker": v["worker"], "shard": v["shard"],
                                "since": v["since"], "seq": v["seq"], "push_seq": p["seq"], "keys": lost})
    return Verdict(not missing, {"pairs_checked": checked, "missing": missing[:10], "missing_count": len(missing)})


def monotone_reads(history: list[dict], ctx: dict) -> Verdict:
    """Per worker and shard, each pull reads a state at least as new as the one before."""
    last: dict[tuple, tuple] = {}
    back = []
    for e in by_f(history, "pull", "ok"):
        v = e["value"]
        k = (v["worker"], v["shard"])
        if k in last and v["seq"] < last[k][0]:
            back.append({"worker": v["worker"], "shard": v["shard"], "seq": v["seq"], "before": last[k][0],
                         "epoch": v["epoch"], "epoch_before": last[k][1], "t": e["t"]})
        last[k] = (v["seq"], v["epoch"])
    return Verdict(not back, {"regressions": back[:10], "count": len(back), "pulls": len(by_f(history, "pull", "ok"))})


def staleness(history: list[dict], ctx: dict) -> Verdict:
    """BSP/SSP(tau): when a worker finished step s, every other worker had started pushing step s-tau-1.

    Judged from invokes (sent before the server applied them) against the step's end, so the
    order is certain even across processes.
    """
    mode = ctx.get("training", "async")
    if mode == "async":
        return Verdict(True, {"mode": "async", "note": "no staleness bound in async mode"})
    tau = 0 if mode == "bsp" else ctx.get("staleness", 0)
    invokes: dict[str, list[tuple[float, int]]] = {}
    for e in by_f(history, "push", "invoke"):
        invokes.setdefault(e["value"]["worker"], []).append((e["t"], e["value"]["clock"]))
    steps = by_f(history, "train-step")
    workers = sorted({e["value"]["worker"] for e in steps})
    worst, bad = 0, []
    for e in steps:
        w, s = e["value"]["worker"], e["value"]["step"]
        for other in workers:
            if other == w:
                continue
            done = max((c for t, c in invokes.get(other, []) if t < e["t"]), default=-1)
            lead = s - done - 1
            worst = max(worst, lead)
            if lead > tau:
                bad.append({"worker": w, "step": s, "other": other, "other_clock": done, "lead": lead})
    return Verdict(not bad, {"mode": mode, "tau": tau, "max_lead": worst, "violations": bad[:10]})
