"""`pschaos init [DIR]`: a scenario suite in a user's repository, ready for pytest and CI.

It writes two example scenarios (one on psnodes, one naming an adapter skeleton for the user's
own system), a conftest.py implementing both plugin hooks, a release gate, and a GitHub Actions
workflow that runs the suite on the twin, gates it and keeps report.html and junit.xml.
`pytest DIR --pschaos-backend sim` passes as written. The files come from package data
(harness/commands/templates), never from a checkout; an existing file is never overwritten.
"""
from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

# template -> where it goes in the suite
FILES = {
    "kill-primary.yaml": "scenarios/kill-primary.yaml",
    "my-system-kill-leader.yaml": "scenarios/my-system-kill-leader.yaml",
    "my_system.py": "my_system.py",
    "conftest.py": "conftest.py",
    "gate.yaml": "gate.yaml",
    "workflow.yml": ".github/workflows/pschaos.yml",
}


def add_parsers(sub) -> None:
    """The `init` verb on the command line's subparsers."""
    p = sub.add_parser("init", help="scaffold a scenario suite (scenarios, conftest hooks, gate, CI workflow)")
    p.add_argument("dir", nargs="?", default=".", help="where to write it (default: here)")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    p.set_defaults(fn=cmd_init)


def scaffold(dest: Path, force: bool = False) -> tuple[list[Path], list[Path]]:
    """Write the suite's files under `dest`: (written, kept because they existed)."""
    templates = resources.files("pschaos.harness.commands") / "templates"
    written, kept = [], []
    for name, rel in FILES.items():
        target = dest / rel
        if target.exists() and not force:
            kept.append(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text((templates / name).read_text())
        written.append(target)
    return written, kept


def cmd_init(args: argparse.Namespace) -> int:
    dest = Path(args.dir)
    if dest.exists() and not dest.is_dir():
        print(f"pschaos init: {dest} is a file; give a folder for the suite", file=sys.stderr)
        return 2
    written, kept = scaffold(dest, args.force)
    for p in written:
        print(f"  wrote {p}")
    for p in kept:
        print(f"  kept  {p} (it exists; --force overwrites it)")
    print(f"pschaos init: a suite in {dest}. Next:\n"
          f"  pytest {dest} --pschaos-backend sim          # the scenarios on the twin, in seconds\n"
          f"  pschaos gate out/pytest --gate {dest / 'gate.yaml'}   # the release gate over their reports\n"
          f"  then fill in {dest / 'my_system.py'} to put your own system under the same chaos")
    return 0
