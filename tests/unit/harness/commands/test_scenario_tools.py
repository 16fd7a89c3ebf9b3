"""The scenario file's schema, `pschaos lint`, `pschaos list`, `pschaos init` and the generated
reference pages (docs/reference), each against the code they are generated from."""
from __future__ import annotations

import argparse
import json

import jsonschema
import pytest
import yaml

from pschaos.harness.commands.cli import build_parser
from pschaos.harness.commands.init import FILES, scaffold
from pschaos.harness.commands.refdocs import cmd_docs
from pschaos.harness.commands.scenarios import catalog
from pschaos.harness.machinery.tools import REPO
from pschaos.harness.run import library
from pschaos.harness.run.schema import scenario_schema

SCHEMA = scenario_schema()


@pytest.mark.parametrize("name", library.names())
def test_every_library_scenario_is_valid_by_the_schema(name):
    jsonschema.Draft202012Validator(SCHEMA).validate(yaml.safe_load(library.path_of(name).read_text()))


def test_the_schema_refuses_what_the_loader_refuses():
    v = jsonschema.Draft202012Validator(SCHEMA)
    good = yaml.safe_load(library.path_of("kill-primary").read_text())
    assert v.is_valid(good)
    for bad in ({**good, "faults": [{**good["faults"][0], "kind": "melt"}]},                        # no such kind
                {**good, "faults": [{"at": {"time": 1}, "kind": "latency", "target": "workers -> nodes"}]},  # latency_ms
                {**good, "faults": [{"at": {"time": 1}, "kind": "kill", "target": "etcd", "params": {"wipe": "yes"}}]},
                {**good, "expect": {"checks": ["no-such-check"]}},
                {**good, "cluster": {"shards": "many"}},
                {**good, "colour": "red"}):
        assert not v.is_valid(bad), bad


def test_lint_says_file_line_field_and_exits_2(tmp_path, capsys):
    from pschaos.harness.commands.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ncluster:\n  shards: many\n")
    assert main(["lint", "kill-primary", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:3: cluster.shards" in err
    assert main(["lint", "kill-primary"]) == 0


def test_list_names_every_kind_checker_and_library_scenario():
    from pschaos.harness.checkers.registry import CHECKERS
    from pschaos.harness.faults.registry import ALL_KINDS

    cat = catalog()
    assert set(cat["faults"]) == set(ALL_KINDS) and set(cat["checkers"]) == set(CHECKERS)
    assert set(cat["scenarios"]) == set(library.names())
    assert all(cat["checkers"].values()), "a checker without a docstring: its reference line would be empty"
    assert cat["faults"]["latency"]["params"]["latency_ms"] == "required"


def test_init_writes_every_file_once_and_keeps_what_exists(tmp_path):
    written, kept = scaffold(tmp_path)
    assert sorted(str(p.relative_to(tmp_path)) for p in written) == sorted(FILES.values()) and kept == []
    (tmp_path / "gate.yaml").write_text("mine\n")
    written, kept = scaffold(tmp_path)
    assert written == [] and len(kept) == len(FILES) and (tmp_path / "gate.yaml").read_text() == "mine\n"
    for rel in FILES.values():
        if rel.startswith("scenarios/"):
            jsonschema.Draft202012Validator(SCHEMA).validate(yaml.safe_load((tmp_path / rel).read_text()))


def test_the_committed_reference_pages_are_the_code_s():
    """docs/reference is generated (`pschaos docs --out docs/reference`): a change to a parser, a
    fault kind, a checker's docstring or the library without regenerating it fails here."""
    assert cmd_docs(argparse.Namespace(out=str(REPO / "docs" / "reference"), check=True, parser=build_parser())) == 0


def test_a_stale_reference_page_is_found(tmp_path):
    out = tmp_path / "ref"
    assert cmd_docs(argparse.Namespace(out=str(out), check=False, parser=build_parser())) == 0
    (out / "faults.md").write_text((out / "faults.md").read_text().replace("latency", "lateness", 1))
    assert cmd_docs(argparse.Namespace(out=str(out), check=True, parser=build_parser())) == 1
    assert json.loads(json.dumps(SCHEMA))["$defs"]["Fault"]["properties"]["kind"]["enum"]
