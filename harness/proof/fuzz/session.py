"""`pschaos fuzz`: its own 1-shard x 3-copy cluster (real etcd, real node processes), the fuzz
run, the summary on stdout and in DIR/summary.json, every case in DIR/cases.jsonl.

Exit 0: no violation; 1: violations (printed with their request bytes and the rerun command);
2: etcd is not installed; 3: no evidence (the cluster did not start or was not whole, or no
request was judged). Every cluster started is torn down, on Ctrl-C too.
"""
from __future__ import annotations

import argparse
import json
import sys
import uuid
from pathlib import Path

from pschaos.harness.proof.fuzz.parts import DIM, TABLE
from pschaos.harness.proof.fuzz.report import format_text
from pschaos.harness.proof.fuzz.runner import FuzzRun, prepare


def fuzz_main(args: argparse.Namespace) -> int:
    from pschaos.harness.backends.process.backend import ProcessBackend
    from pschaos.harness.backends.cluster import ClusterSpec
    from pschaos.harness.machinery.tools import find

    if find("etcd") is None:
        print("pschaos fuzz: etcd is not installed (apt-get install etcd-server, or make install)", file=sys.stderr)
        return 2
    out = Path(args.out or f"out/fuzz-{args.seed}")
    out.mkdir(parents=True, exist_ok=True)
    run_id = f"fuzz-{uuid.uuid4().hex[:8]}"
    started: list = []

    def fresh():
        """A new cluster, seeded; the previous one (if any) is torn down first."""
        while started:
            started.pop().teardown()
        spec = ClusterSpec(shards=1, copies=3, workers=0, checkpoint_interval_s=3600)
        be = ProcessBackend(spec, out / "run" / f"cluster{fresh.n}", f"{run_id}-{fresh.n}", args.seed,
                            tables={TABLE: DIM})
        fresh.n += 1
        started.append(be)
        be.start()
        prepare(be)
        return be
    fresh.n = 0

    rerun = f"pschaos fuzz --requests {args.requests} --seed {args.seed}"
    try:
        try:
            be = fresh()
        except Exception as e:  # noqa: BLE001 - whatever stopped the cluster, there is no evidence
            print(f"pschaos fuzz: the cluster did not start: {e.__class__.__name__}: {e}", file=sys.stderr)
            return 3
        run = FuzzRun(be, args.seed, args.requests, rerun=rerun, restart=fresh, max_restarts=args.max_restarts)
        summary = run.run()
    finally:
        for be in started:
            be.teardown()
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    with open(out / "cases.jsonl", "w") as f:
        for rec in run.records:
            f.write(json.dumps(rec) + "\n")
    print(json.dumps(summary, default=str) if args.json else format_text(summary))
    print(f"pschaos fuzz: summary {out / 'summary.json'}, every case in {out / 'cases.jsonl'}", file=sys.stderr)
    if summary["violation_counts"]:
        return 1
    return 3 if summary["sent"] == 0 or summary["stopped_early"] else 0

