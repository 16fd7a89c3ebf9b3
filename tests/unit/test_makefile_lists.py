"""The Makefile's scenario lists name scenarios that exist, and each one `make test` leaves to
`make test-long` names what proves it in `make test`: pytest's --deselect ignores a path that
matches nothing, so a renamed scenario would silently run in neither pass, or in both."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _joined() -> str:
    return (REPO / "Makefile").read_text().replace("\\\n", " ")


def _list(name: str) -> list[str]:
    m = re.search(rf"^{name}\s*:=\s*\$\(addprefix scenarios/,\$\(addsuffix \.yaml,([^)]*)\)\)", _joined(), re.M)
    assert m, f"Makefile: {name} is not a list of library scenarios"
    return m.group(1).split()


def test_every_listed_scenario_exists():
    for name in ("DOCKER_SCENARIOS", "DOCKER_ALSO", "DOCKER_LONG", "LONG_SCENARIOS"):
        missing = [n for n in _list(name) if not (REPO / "scenarios" / f"{n}.yaml").is_file()]
        assert not missing, f"Makefile {name} names scenarios that are not in scenarios/: {missing}"


def test_each_scenario_left_to_test_long_names_its_proof():
    text = (REPO / "Makefile").read_text()
    block = text[text.index("# What `make test` leaves to `make test-long`"):text.index("LONG_SCENARIOS :=")]
    said = {n for line in re.findall(r"^#\s+(\S.*?)\s+->", block, re.M) for n in re.split(r",\s*", line)}
    unsaid = [n for n in _list("LONG_SCENARIOS") if n not in said]
    assert not unsaid, f"Makefile: LONG_SCENARIOS {unsaid} do not say which test in `make test` proves them"


def test_long_scenarios_run_in_test_long_and_are_left_out_of_test():
    text = _joined()
    assert re.search(r"^MAIN_SKIP\s*=.*\$\(LONG_SCENARIOS\)", text, re.M), "make test does not leave LONG_SCENARIOS out"
    long_recipe = text[text.index("\ntest-long:"):]
    long_recipe = long_recipe[:long_recipe.index("\n\n")]
    assert "$(LONG_SCENARIOS)" in long_recipe, "make test-long does not run LONG_SCENARIOS"


def test_what_the_main_pass_leaves_to_etcd_35_runs_there():
    text = _joined()
    only = re.search(r"^ETCD35_ONLY\s*:=\s*(.*)$", text, re.M).group(1).split()
    etcd = re.search(r"^ETCD_TESTS\s*:=\s*(.*)$", text, re.M).group(1)
    assert only and all(t in etcd.split() and (REPO / t).is_file() for t in only), (only, etcd)


def test_each_named_proof_runs_on_processes_in_make_test():
    """A proof is a scenario of the library or a test; a scenario named as a proof is not itself
    left out of the process pass (LONG_SCENARIOS, or DOCKER_ALSO when the docker tier runs)."""
    text = (REPO / "Makefile").read_text()
    block = text[text.index("# What `make test` leaves to `make test-long`"):text.index("LONG_SCENARIOS :=")]
    entries = re.split(r"\n#   (?=\S[^\n]*->)", block)[1:]
    left_out = set(_list("LONG_SCENARIOS")) | set(_list("DOCKER_ALSO"))
    library = {f.stem for f in (REPO / "scenarios").glob("*.yaml")}
    for entry in entries:
        moved, _, proof = entry.partition("->")
        named = {w for w in re.findall(r"[a-z0-9]+(?:-[a-z0-9]+)+", proof) if w in library}
        tests = re.findall(r"test_\w+\.py::test_\w+", proof)
        assert named or tests, f"Makefile: {moved.strip()} names no scenario or test as its proof"
        assert not named & left_out, f"Makefile: {moved.strip()}'s proof {sorted(named & left_out)} is left out too"
        for t in tests:
            f, _, fn = t.partition("::")
            assert f"def {fn}(" in (REPO / "tests" / "integration" / f).read_text(), f"Makefile: no test {t}"
