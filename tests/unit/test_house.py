"""The house's rules, read from the code's own imports (ast), so a change that breaks one fails
here: no import circle between modules, none between harness' rooms, imports pointing down the
layers, psnodes never importing the harness, no source file over 400 lines.
docs/architecture.md draws the same picture."""
from __future__ import annotations

import ast
from pathlib import Path

from pschaos.harness.machinery.tools import REPO

TOPS = ("harness", "psnodes", "netfaults", "diskfaults", "reports")
# harness' rooms, lowest first: a room may import its own and lower ones, never a higher one
LAYERS = ["errors", "machinery", "fanout", "history", "checkers", "faults", "backends", "run", "proof", {"plugin", "commands"}]
MAX_LINES = 400


def layer_of(room: str) -> int:
    return next(i for i, rooms in enumerate(LAYERS) if room == rooms or room in rooms)


def modules() -> dict[str, Path]:
    out = {}
    for top in TOPS:
        for p in (REPO / top).rglob("*.py"):
            if "__pycache__" in p.parts or p.name.endswith("_pb2.py") or p.name.endswith("_pb2_grpc.py"):
                continue
            parts = list(p.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project's modules it imports (TYPE_CHECKING and function-level imports too)."""
    def own(name: str) -> str | None:
        name = name.removeprefix("pschaos.")
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        out = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[:len(parts) - n.level + 1] + ([n.module] if n.module else []))
                for cand in [base] + [f"{base}.{a.name}" for a in n.names]:
                    if (o := own(cand)) and (cand.removeprefix("pschaos.") in mods or o == own(base)):
                        out.add(o)
            elif isinstance(n, ast.Import):
                out |= {o for a in n.names if (o := own(a.name))}
        out.discard(m)
        edges[m] = {e for e in out if not m.startswith(e + ".")}     # a package's own parent: not an arrow
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_between_modules():
    assert circles(imports(modules())) == []


def test_no_circle_between_rooms_and_harness_imports_point_down():
    edges = imports(modules())
    rooms: dict[str, set[str]] = {}
    up = []
    for a, bs in edges.items():
        for b in bs:
            ra, rb = a.split(".")[:2], b.split(".")[:2]
            if ra != rb:
                rooms.setdefault(".".join(ra), set()).add(".".join(rb))
            if a.startswith("harness.") and b.startswith("harness.") and len(ra) == len(rb) == 2 and ra != rb:
                if layer_of(rb[1]) > layer_of(ra[1]) or (layer_of(rb[1]) == layer_of(ra[1])):
                    up.append(f"{a} -> {b}")
    assert circles(rooms) == []
    assert up == [], "imports that run up (or across) harness' layers: " + "; ".join(sorted(up))


def test_no_circle_between_the_rooms_of_any_folder():
    """In each package, its modules and sub-packages are rooms: none may import another that
    imports it back, however deep the imports that tie them."""
    edges = imports(modules())
    found = {}
    for pkg in sorted({m.rpartition(".")[0] for m in edges if "." in m}):
        rooms: dict[str, set[str]] = {}
        for a, bs in edges.items():
            if a.startswith(pkg + "."):
                ra = a[len(pkg) + 1:].split(".")[0]
                rooms.setdefault(ra, set()).update(rb for b in bs if b.startswith(pkg + ".")
                                                   and (rb := b[len(pkg) + 1:].split(".")[0]) != ra)
        if c := circles(rooms):
            found[pkg] = c
    assert found == {}


def test_psnodes_never_imports_the_harness():
    bad = [f"{a} -> {b}" for a, bs in imports(modules()).items() if a.startswith("psnodes") for b in bs
           if not b.startswith("psnodes")]
    assert bad == []


def test_no_source_file_over_400_lines():
    big = {str(p.relative_to(REPO)): n for p in modules().values() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert big == {}
