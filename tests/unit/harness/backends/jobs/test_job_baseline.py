"""The fault-free run resume-exact compares with (jobs/system.py prepare): only an uninterrupted,
passing run is a baseline; anything else leaves resume-exact unknown, with the reason."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pschaos.harness.backends.jobs.system import JobSystem
from pschaos.harness.backends.jobs.torchrun_ddp import TorchrunDDP
from pschaos.harness.run.scenario import Scenario

SC = Scenario(name="ddp-x", system="torchrun-ddp", expect={"checks": ["resume-exact"]})
FINAL = {"f": "job-final", "type": "info", "node": "rank-0", "t": 9.0,
         "value": {"worker": "rank-0", "incarnation": "0.0", "steps": 6, "audit": 6.0, "digest": "d"}}


def rerun_writing(events: list[dict], verdict: str = "pass", **extra):
    def rerun(sc, folder: Path) -> dict:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
        return {"verdict": verdict, **extra}
    return rerun


def test_an_uninterrupted_passing_run_is_the_baseline_and_says_where_it_was_made(tmp_path):
    got = JobSystem(TorchrunDDP).prepare(SC, tmp_path, rerun_writing([FINAL], reused_from="/elsewhere"), print)
    assert got["baseline"]["digest"] == "d" and got["baseline"]["made_in"] == "/elsewhere"


@pytest.mark.parametrize("events, verdict, words", [
    ([], "pass", "reported no final model"),
    ([{"f": "job-restart", "type": "info", "node": "harness", "t": 3.0, "value": {"incarnation": 1}}, FINAL],
     "pass", "restarted (incarnations 1)"),
    ([{**FINAL, "value": {**FINAL["value"], "incarnation": "0.1"}}], "pass", "restarted (incarnations 0.1)"),
    ([FINAL], "fail", "was judged fail, not pass"),
])
def test_a_run_that_restarted_failed_or_ended_without_a_model_is_no_baseline(tmp_path, events, verdict, words):
    """Review: a fault-free run the TF watchdog or a gloo timeout restarted was used as the model
    every resume must reproduce, so a resume bug in both passed resume-exact."""
    got = JobSystem(TorchrunDDP).prepare(SC, tmp_path, rerun_writing(events, verdict), print)
    assert got["baseline"] is None and words in got["baseline_error"]
