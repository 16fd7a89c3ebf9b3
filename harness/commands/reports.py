"""`pschaos report` and `pschaos gate`: many runs aggregated into one report, and a release gate
over them as an exit code. Both read runs through reports.gate.gather, which names every piece of
missing evidence; the gate never passes over it (exit 2)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parsers(sub) -> None:
    """The `report` and `gate` verbs on the command line's subparsers."""
    rp = sub.add_parser("report", help="aggregate many runs into one report (HTML, JSON, Markdown)")
    rp.add_argument("dirs", nargs="+", help="run folders (searched for report.json)")
    rp.add_argument("--out", default="out/aggregate", help="where to write (default out/aggregate)")
    rp.add_argument("--json", action="store_true", help="print the outcome as JSON")
    rp.set_defaults(fn=cmd_report)

    g = sub.add_parser("gate", help="check runs against a gate file (exit 0 holds, 1 violated, 2 malformed "
                                    "or evidence missing, 3 a run unknown)")
    g.add_argument("dirs", nargs="+", help="run folders (searched for report.json)")
    g.add_argument("--gate", required=True, help="gate file (YAML)")
    g.add_argument("--json", action="store_true", help="print the outcome as JSON (exit code as without)")
    g.set_defaults(fn=cmd_gate)


def cmd_report(args: argparse.Namespace) -> int:
    from pschaos.reports.aggregate import aggregate, write
    from pschaos.reports.gate import gather

    found, problems = gather(args.dirs)
    reports = [(p, r) for p, r in found if Path(args.out).resolve() not in p.resolve().parents]
    for p in problems:
        print(f"pschaos report: missing evidence: {p}", file=sys.stderr)
    if not reports:
        print(f"pschaos report: no report.json under {', '.join(args.dirs)}", file=sys.stderr)
        return 2
    agg = aggregate(reports)
    write(agg, Path(args.out))
    if args.json:
        print(json.dumps({"exit": 2 if problems else 0, "runs": agg["runs"], "passed": agg["passed"],
                          "scenarios": sorted(agg["scenarios"]), "flaky": agg["flaky"], "missing_evidence": problems,
                          "report": str(Path(args.out) / "report.html")}, indent=2))
    else:
        print(f"pschaos report: {agg['passed']}/{agg['runs']} runs passed across {len(agg['scenarios'])} scenario(s); "
              f"flaky: {', '.join(agg['flaky']) or 'none'} -> {Path(args.out) / 'report.html'}")
    return 2 if problems else 0      # an aggregate over evidence that could not all be read is no clean one


def cmd_gate(args: argparse.Namespace) -> int:
    from pschaos.reports.gate import GateFileError, evaluate, gather, load_gate

    try:
        gate = load_gate(args.gate)
    except GateFileError as e:
        print(f"pschaos gate: {e}", file=sys.stderr)
        return 2
    reports, problems = gather(args.dirs)
    if not reports and not problems:
        problems = [f"no report.json under {', '.join(args.dirs)}"]
    violations = evaluate(gate, reports) if not problems else []
    unknown = [f"{r.get('scenario')} (run {p.parent})" for p, r in reports if r.get("verdict") == "unknown"]
    rc = 2 if problems else 1 if violations else 3 if unknown else 0
    if args.json:
        print(json.dumps({"exit": rc, "runs": len(reports), "missing_evidence": problems, "violations": violations,
                          "unknown_runs": unknown}, indent=2))
        return rc
    for p in problems:
        print(f"GATE MISSING EVIDENCE {p}", file=sys.stderr)
    for v in violations:
        print(f"GATE FAIL {v}")
    for u in unknown:
        print(f"GATE UNKNOWN {u}: its verdict is unknown, see its report for the reason")
    scenarios = len({r.get("scenario") for _, r in reports})
    said = {0: "all bounds hold", 1: f"{len(violations)} violation(s)", 2: "evidence missing, nothing judged",
            3: f"no bound violated, but {len(unknown)} run(s) unknown"}[rc]
    print(f"pschaos gate: {len(reports)} run(s) of {scenarios} scenario(s); {said}")
    return rc
