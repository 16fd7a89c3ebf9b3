"""`pschaos schema`, `pschaos lint` and `pschaos list`: what a scenario file may say, whether
files say it right (without running them), and what the library, the fault kinds and the
checkers offer."""
from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path


def add_parsers(sub) -> None:
    """The `schema`, `lint` and `list` verbs on the command line's subparsers."""
    s = sub.add_parser("schema", help="print the scenario file's JSON Schema (for editors and validators)")
    s.add_argument("--out", help="write it to this file instead of stdout")
    s.set_defaults(fn=cmd_schema)
    lt = sub.add_parser("lint", help="check scenario files without running them (exit 2 on the first bad one's "
                                     "file:line: field: message)")
    lt.add_argument("files", nargs="+", help="scenario YAML files, or library scenarios by name")
    lt.add_argument("--json", action="store_true", help="one JSON object a file")
    lt.set_defaults(fn=cmd_lint)
    ls = sub.add_parser("list", help="the library's scenarios, the fault kinds with their params, the checkers")
    ls.add_argument("what", nargs="?", choices=["scenarios", "faults", "checkers"], help="only this part")
    ls.add_argument("--json", action="store_true", help="as JSON")
    ls.set_defaults(fn=cmd_list)


def cmd_schema(args: argparse.Namespace) -> int:
    from pschaos.harness.run.schema import scenario_schema

    text = json.dumps(scenario_schema(), indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
        print(f"pschaos schema: wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    """Every file is loaded (parsed and validated) as `pschaos run` would, and none is run."""
    from pschaos.harness.errors import HarnessError
    from pschaos.harness.run import library
    from pschaos.harness.run.scenario import load_scenario

    bad = 0
    for f in args.files:
        try:
            sc = load_scenario(library.resolve(f))
            sel = sc.selection()
            res = {"file": f, "ok": True, "scenario": sc.name, **sel.to_json(), **_drawn_at(sc, 1)}
        except HarnessError as e:            # ScenarioError: file:line: field: message, fix
            bad += 1
            res = {"file": f, "ok": False, "error": str(e)}
        if args.json:
            print(json.dumps(res))
        else:
            print(f"ok   {f} ({res['scenario']})" if res["ok"] else res["error"], file=sys.stdout if res["ok"] else sys.stderr)
            if res["ok"]:        # what its runs will judge, and what became of the system's other checks
                print(f"     checks: {', '.join(res['checks'])}")
                for name, why in {**res["excluded"], **res["not_applicable"]}.items():
                    print(f"     {'excluded' if name in res['excluded'] else 'not run'}: {name}: {why}")
                if res.get("drawn_adds") is not None:
                    print(f"     a nemesis: its draws at each seed add what they surely bring; at seed 1: "
                          f"{', '.join(res['drawn_adds']) or 'nothing'}")
    return 2 if bad else 0


def _drawn_at(sc, seed: int) -> dict:
    """For a nemesis scenario, the checks its draws at `seed` add to the selection as written (a
    run judges by its seed's draws: harness/run/selection.py)."""
    if sc.nemesis is None:
        return {}
    from pschaos.harness.run.nemesis import schedule

    written = set(sc.selection().checks)
    return {"drawn_adds": [c for c in sc.selection(schedule(sc.nemesis, seed)).checks if c not in written]}


def first_paragraph(doc: str) -> str:
    """A docstring's first paragraph on one line."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def catalog() -> dict:
    """The library's scenarios (first line of each description), the fault kinds with their
    params, and the checkers with the first line of their docstrings."""
    from pschaos.harness.checkers.registry import CHECKERS
    from pschaos.harness.run import library
    from pschaos.harness.run.scenario import load_scenario
    from pschaos.harness.run.schema import kind_params
    from pschaos.harness.faults.registry import ALL_KINDS
    from pschaos.netfaults.faults.base import REQUIRED

    scen = {}
    for n in library.names():
        try:
            scen[n] = (load_scenario(library.path_of(n)).description or "").strip().split(". ")[0]
        except Exception as e:  # noqa: BLE001 - a broken library file is listed with its error
            scen[n] = f"(does not load: {e})"
    faults = {}
    for k in ALL_KINDS:
        spec, doc = kind_params(k)
        faults[k] = {"about": doc, "params": {p: ("required" if d is REQUIRED else d) for p, (_, d) in spec.items()}}
    checks = {n: first_paragraph(inspect.getdoc(f) or "") for n, f in CHECKERS.items()}
    return {"scenarios": scen, "faults": faults, "checkers": checks}


def cmd_list(args: argparse.Namespace) -> int:
    cat = catalog()
    parts = [args.what] if args.what else ["scenarios", "faults", "checkers"]
    if args.json:
        print(json.dumps({p: cat[p] for p in parts}, indent=2, default=str))
        return 0
    for p in parts:
        print(f"{p}:")
        for name, v in cat[p].items():
            if p == "faults":
                params = ", ".join(f"{k}={d}" for k, d in v["params"].items()) or "no params"
                print(f"  {name:26} {params}\n  {'':26} {v['about']}")
            else:
                print(f"  {name:26} {v}")
    return 0
