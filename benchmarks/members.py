"""Workers joining and leaving BSP/SSP (issue 13): verdicts, barrier stall after a worker loss,
steps/s before and after a join, over seeds and backends.

Runs each membership scenario with `pschaos run` (one at a time: the machine is shared), then
reads each report and history: the verdict, barrier-live's stall per worker loss, and for a
scale-out the barrier's rate (worker-0's steps per second, and all workers' steps per second)
over the 2 s before the fault (from the first step at most) and the 2 s after the last joiner was admitted.

    .venv/bin/python benchmarks/members.py [--seeds 1 2 3] [--backends sim process] [--out out/members]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

SCENARIOS = ("bsp-scale-out-workers", "bsp-scale-in-workers", "ssp-scale-out-workers", "ssp-scale-in-workers",
             "bsp-kill-worker")
WINDOW_S = 2.0


def rates(history: list[dict]) -> dict | None:
    """Steps/s of worker-0 and of all workers before the scale-out and after its joiners were admitted."""
    start = next((e["t"] for e in history if e["f"] == "fault-start" and e["value"].get("kind") == "scale-out"), None)
    admitted = [e["t"] for e in history if e["f"] == "member-admitted" and e["value"].get("start", 0) > 0]
    if start is None or not admitted:
        return None
    steps = [(e["t"], e["value"]["worker"]) for e in history if e["f"] == "train-step"]
    after = max(admitted)
    before = max(start - WINDOW_S, min(t for t, _ in steps))     # not the start-up before the first step

    def rate(lo: float, hi: float, who: str | None) -> float:
        return round(sum(1 for t, w in steps if lo <= t < hi and (who is None or w == who)) / (hi - lo), 1)
    return {"worker0_before": rate(before, start, "worker-0"),
            "worker0_after": rate(after, after + WINDOW_S, "worker-0"),
            "all_before": rate(before, start, None), "all_after": rate(after, after + WINDOW_S, None),
            "join_s": round(after - start, 3)}


def quantile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))], 3) if q < 1 else round(xs[-1], 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--backends", nargs="+", default=["sim", "process"])
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    ap.add_argument("--out", default="out/members")
    args = ap.parse_args()
    rows, stalls = [], {}
    for backend in args.backends:
        for sc in args.scenarios:
            for seed in args.seeds:
                out = Path(args.out) / f"{sc}-{backend}-{seed}"
                subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "run", f"scenarios/{sc}.yaml", "--backend",
                                backend, "--seed", str(seed), "--out", str(out)], capture_output=True)
                rep = json.loads((out / "report.json").read_text())
                hist = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
                live = rep["checks"].get("barrier-live", {}).get("details", {})
                row = {"scenario": sc, "backend": backend, "seed": seed, "verdict": rep["verdict"],
                       "failed": [c for c, v in rep["checks"].items() if v["valid"] is not True],
                       "stalls_s": [s["stall_s"] for s in live.get("stalls", [])], "rates": rates(hist)}
                if sc == "bsp-kill-worker":
                    stalls.setdefault(backend, []).extend(row["stalls_s"])
                rows.append(row)
                print(json.dumps(row), flush=True)
    for backend, xs in stalls.items():
        print(f"bsp-kill-worker stall on {backend}: n={len(xs)} p50={quantile(xs, 0.5)} "
              f"p99={quantile(xs, 0.99)} max={quantile(xs, 1)} mean={round(statistics.mean(xs), 3)}")
    return 0 if all(r["verdict"] == "pass" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
