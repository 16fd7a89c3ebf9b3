"""The training-job checks catch the bugs they exist for, planted in a temporary copy of the
example DDP job (scripts/ddp_train.py), one per check: a resume that drops the optimizer state
(resume-exact), a checkpoint every 10×N steps (lost-work-bounded), a step that applies its
update twice (exactly-once, from the audit parameter), a collective that never times out
(no-silent-hang). The real job passes the same scenarios in `make test` (scenarios/ddp-*.yaml)
and the checks' unit tests (tests/unit/harness/checkers/test_jobs.py) fail each check on a
hand-written history; these runs are the end-to-end proof, a minute each, so `make test-long`."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pschaos.harness.machinery.tools import REPO

from .mutants import mutant_copy, run_scenario

pytestmark = [pytest.mark.integration, pytest.mark.long]

SCRIPT = "harness/backends/jobs/scripts/ddp_train.py"
PLANTED = {
    "drops-optimizer-state": ("resume-exact", "ddp-kill-rank",
                              [('        opt.load_state_dict(state["optimizer"])\n', "")]),
    "checkpoints-every-10n": ("lost-work-bounded", "ddp-kill-rank",
                              [("if step % a.ckpt_every == 0 and rank == 0:",
                                "if step % (10 * a.ckpt_every) == 0 and rank == 0:")]),
    "applies-twice": ("exactly-once", "ddp-kill-rank",
                      [("            opt.step()\n", "            opt.step()\n            opt.step()\n")]),
    "never-times-out": ("no-silent-hang", "ddp-pause-past-bound",
                        [("timeout=datetime.timedelta(seconds=a.timeout_s)", "timeout=datetime.timedelta(hours=1)")]),
}


def pause_past_bound(out: Path) -> Path:
    """ddp-pause-rank with a pause (75 s) longer than its hang bound (60 s): the real job's
    collective times out after 5 s and torchrun restarts the group within the bound; a job
    whose collective never times out waits out the whole pause in silence."""
    sc = yaml.safe_load((REPO / "scenarios" / "ddp-pause-rank.yaml").read_text())
    sc["name"] = "ddp-pause-past-bound"
    sc["faults"][0]["duration_s"] = 75
    sc["expect"]["checks"] = ["no-silent-hang"]
    p = out / "ddp-pause-past-bound.yaml"
    p.write_text(yaml.safe_dump(sc))
    return p


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_planted_job_bug_fails_its_check(tmp_path: Path, bug: str) -> None:
    check, scenario, patch = PLANTED[bug]
    root = mutant_copy(tmp_path / "code", {SCRIPT: patch})
    path = pause_past_bound(tmp_path) if scenario == "ddp-pause-past-bound" else REPO / "scenarios" / f"{scenario}.yaml"
    code, rep, out = run_scenario(root, path, tmp_path / "out", seed=1, timeout=500)
    assert code == 1 and rep.get("verdict") == "fail", out
    v = rep["checks"][check]
    assert v["valid"] is False, (check, v)
