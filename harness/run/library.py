"""The scenario library, wherever pschaos is installed: YAML files shipped as package data
(pschaos.scenarios, the repository's scenarios/ folder), found with importlib.resources, never
through this checkout's paths. `pschaos run kill-primary`, soak, hunt, selftest, sim validate and
bench take a library scenario by its name."""
from __future__ import annotations

from difflib import get_close_matches
from importlib import resources
from pathlib import Path

from pschaos.harness.errors import ScenarioError


def root() -> Path:
    """The library's folder (the installed package data, or scenarios/ in a checkout)."""
    return Path(str(resources.files("pschaos.scenarios")))


def names() -> list[str]:
    """Every library scenario's name, sorted (the file names without .yaml)."""
    return sorted(p.stem for p in root().glob("*.yaml"))


def path_of(name: str) -> Path:
    """A library scenario's file by its name, or a ScenarioError that names the closest ones."""
    p = root() / f"{name}.yaml"
    if p.is_file():
        return p
    near = get_close_matches(name, names(), n=3)
    raise ScenarioError(f"{name}: no such scenario file, and no library scenario of that name"
                        + (f"; did you mean {', '.join(near)}?" if near else "; `pschaos list` shows the library"))


def resolve(arg: str | Path) -> Path:
    """A scenario argument as a file: an existing path as it is, else a library name (a bare word
    without a suffix or a folder), else the path as given (its loader says it is missing)."""
    p = Path(arg)
    if p.exists() or p.suffix or len(p.parts) > 1:
        return p
    return path_of(str(arg))
