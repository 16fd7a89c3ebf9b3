"""The step shim's records: whole lines, also after an incarnation died mid-line."""
from __future__ import annotations

import json
import sys

import pytest

from pschaos.harness.backends.jobs.api import SHIM_DIR


@pytest.fixture
def shim(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(SHIM_DIR))
    monkeypatch.setenv("PSCHAOS_EVENTS_DIR", str(tmp_path))
    import pschaos_shim
    yield pschaos_shim
    sys.modules.pop("pschaos_shim", None)


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_a_new_incarnation_after_a_torn_line_keeps_its_own_lines_whole(shim, tmp_path, monkeypatch):
    (tmp_path / "chief.jsonl").write_text('{"t": 1, "f": "step", "type": "ok"}\n{"t": 2, "f": "st')   # SIGKILL mid-write
    monkeypatch.setenv("PSCHAOS_INCARNATION", "1")
    s = shim.Shim("chief")
    s.started(resumed_from=20)
    s.close()
    text = (tmp_path / "chief.jsonl").read_text().splitlines()
    assert text[1] == '{"t": 2, "f": "st'                          # the torn line stays torn, alone
    fs = [json.loads(x)["f"] for x in text[2:]]
    assert fs == ["job-start", "job-resume"]


def test_a_step_is_invoked_then_acknowledged_with_its_incarnation(shim, tmp_path):
    s = shim.Shim("rank-0")
    with s.step(3) as rec:
        rec["loss"] = 0.5
    s.close()
    evs = lines(tmp_path / "rank-0.jsonl")
    assert [(e["f"], e["type"]) for e in evs] == [("job-start", "info"), ("step", "invoke"), ("step", "ok")]
    assert evs[2]["value"]["loss"] == 0.5 and evs[2]["value"]["incarnation"] == "0.0"
