"""The core stays deterministic: no module of pschaos.psnodes.core imports I/O, threads, clocks or chance.

Both shells (the real node and the SimPy twin) must get the same answer for the same inputs; a
clock read or an etcd call inside the core would make the twin simulate something else.
"""
import ast
from pathlib import Path

import pschaos.psnodes.core

ALLOWED = {"__future__", "dataclasses", "enum", "typing", "math", "collections"}
CORE = "pschaos.psnodes.core"
PURE = {"pschaos.psnodes.placement"}      # pure: hashing of names and ids to shards


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Import):
            out += [(0, a.name) for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            out.append((n.level, n.module or ""))
    return out


def test_core_imports_nothing_impure():
    core = Path(pschaos.psnodes.core.__file__).parent
    bad = []
    for f in sorted(core.glob("*.py")):
        for level, mod in imports(f):
            top = mod.split(".")[0]
            ok = level == 1 or (level == 0 and (top in ALLOWED or mod == CORE or mod.startswith(CORE + ".")
                                                or mod in PURE))
            if not ok:
                bad.append(f"{f.name}: {'.' * level}{mod}")
    assert not bad, f"pschaos.psnodes.core must stay free of I/O, threads and clocks: {bad}"
