"""How fast `pschaos hunt` finds and shrinks each bug of the zoo (issue 10's targets).

For every mutant: `pschaos hunt SCENARIO --mutant NAME` on the simulator, SCENARIO being the
scenario whose cluster the selftest killed it on (its cluster only: the hunt draws its own
random fault schedules), then the table: the trial that failed, the faults found and after
shrinking, and the seconds to find and to shrink. Two hunts at a time; each is bounded by
--budget schedules and --shrink-budget runs, so the whole study stops by itself.

    .venv/bin/python benchmarks/zoo_hunt.py [--budget 10] [--shrink-budget 20] [--out out/zoo-hunt]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# the cluster each hunt runs on: the scenario that killed the mutant in `pschaos selftest --backend sim`
CLUSTER_OF = {
    "sync-early-ack": "partition-primary-replicas", "no-epoch-fencing": "short-cut-primary",
    "retry-applied-twice": "split-brain-restore", "delta-get-and-clear": "kill-primary",
    "log-overflow-drops": "kill-replica", "manifest-before-data": "kill-during-checkpoint",
    "ssp-off-by-one": "ssp-straggler", "version-across-epoch": "all-copies-lost",
    "out-of-order-apply": "kill-primary", "isr-drop-local-only": "async-partition-primary",
    "adam-step-not-persisted": "replica-restart-catchup", "rows-created-on-read": "replica-restart-catchup",
    "incarnation-ignored": "kill-restart-worker", "no-lease-bound": "split-brain-restore",
}


def one(mutant: str, scenario: str, args: argparse.Namespace) -> dict:
    out = Path(args.out) / mutant
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pschaos.harness.commands.cli", "hunt", scenario, "--mutant", mutant, "--budget",
                        str(args.budget), "--shrink-budget", str(args.shrink_budget), "--no-confirm", "--json",
                        "--out", str(out)], capture_output=True, text=True)
    wall = round(time.monotonic() - t0, 1)
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"mutant": mutant, "scenario": scenario, "error": (p.stderr or p.stdout)[-400:], "wall_s": wall}
    found, shrunk = doc.get("found"), doc.get("shrunk")
    row = {"mutant": mutant, "scenario": scenario, "trials": doc["trials"], "wall_s": wall,
           "found_trial": None if found is None else found["trial"] + 1,
           "failed": None if found is None else found["failed"],
           "faults_found": None if found is None else len(found["faults"]),
           "faults_shrunk": None if shrunk is None else len(shrunk["faults"]),
           "shrink_runs": None if shrunk is None else shrunk["runs"],
           "find_s": doc["find_s"], "shrink_s": doc["shrink_s"],
           "replayed": (doc.get("replayed") or {}).get("same_failure")}
    print(f"[zoo-hunt] {mutant}: {json.dumps(row)}", file=sys.stderr, flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--shrink-budget", type=int, default=20)
    ap.add_argument("--mutants", help="comma-separated (default: the whole zoo)")
    ap.add_argument("-j", dest="par", type=int, default=2)
    ap.add_argument("--out", default="out/zoo-hunt")
    args = ap.parse_args()
    names = args.mutants.split(",") if args.mutants else list(CLUSTER_OF)
    with ThreadPoolExecutor(args.par) as pool:
        rows = list(pool.map(lambda m: one(m, CLUSTER_OF[m], args), names))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "zoo-hunt.json").write_text(json.dumps(rows, indent=2))
    print("| mutant | cluster of | found in trial | failed | faults found -> shrunk | find s | shrink s (runs) | replayed |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['mutant']} | {r['scenario']} | error: {r['error'][-80:]!r} | | | | | |")
        elif r["found_trial"] is None:
            print(f"| {r['mutant']} | {r['scenario']} | not in {r['trials']} | | | {r['find_s']} | | |")
        else:
            print(f"| {r['mutant']} | {r['scenario']} | {r['found_trial']} | {', '.join(r['failed'])} | "
                  f"{r['faults_found']} -> {r['faults_shrunk']} | {r['find_s']} | {r['shrink_s']} ({r['shrink_runs']}) | "
                  f"{r['replayed']} |")
    found = sum(1 for r in rows if r.get("found_trial"))
    print(f"found {found} of {len(rows)} mutants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
