"""The training-job checks catch the bugs they exist for, planted in a temporary copy of each
example job (scripts/ddp_train.py, scripts/tf_ps_train.py), one per check (and for
scripts/accelerate_train.py a resume that drops the optimizer's momentum): a resume that drops
the optimizer state (resume-exact), a checkpoint every 10×N steps (lost-work-bounded), a step
that applies its update twice (exactly-once, from the audit), a step that never times out
(no-silent-hang: DDP's collective; TF's coordinator without its watchdog). The real jobs pass the
same scenarios (scenarios/ddp-*.yaml, tf-*.yaml: ddp-kill-mid-checkpoint and four TensorFlow
ones in `make test`, the rest in `make test-long`, Makefile LONG_SCENARIOS) and the checks' unit tests
(tests/unit/harness/checkers/test_jobs.py) fail each check on a hand-written history; these runs
are the end-to-end proof, a minute or two each, so `make test-long`."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pschaos.harness.machinery.tools import REPO

from .mutants import mutant_copy, run_scenario
from tests.unit.helpers import only_text

pytestmark = [pytest.mark.integration, pytest.mark.long]

DDP = "harness/backends/jobs/scripts/ddp_train.py"
TF = "harness/backends/jobs/scripts/tf_ps_train.py"
ACC = "harness/backends/jobs/scripts/accelerate_train.py"
PLANTED = {
    "ddp-drops-optimizer-state": ("resume-exact", "ddp-kill-rank", DDP,
                                  [('        opt.load_state_dict(state["optimizer"])\n', "")]),
    "ddp-checkpoints-every-10n": ("lost-work-bounded", "ddp-kill-rank", DDP,
                                  [("if step % a.ckpt_every == 0 and rank == 0:",
                                    "if step % (10 * a.ckpt_every) == 0 and rank == 0:")]),
    "ddp-applies-twice": ("exactly-once", "ddp-kill-rank", DDP,
                          [("            opt.step()\n", "            opt.step()\n            opt.step()\n")]),
    "ddp-never-times-out": ("no-silent-hang", "ddp-pause-past-bound", DDP,
                            [("timeout=datetime.timedelta(seconds=a.timeout_s)", "timeout=datetime.timedelta(hours=1)")]),
    "accelerate-drops-optimizer-state": ("resume-exact", "accelerate-kill-rank", ACC,
                                         [("        acc.load_state(str(a.dir / latest.read_text().strip()))\n",
                                           "        acc.load_state(str(a.dir / latest.read_text().strip()))\n"
                                           "        opt.optimizer.state.clear()\n")]),
    "tf-drops-optimizer-state": ("resume-exact", "tf-kill-chief", TF,
                                 [(', **{f"m_{k}": m for k, m in moms.items()})', ")")]),
    "tf-checkpoints-every-10n": ("lost-work-bounded", "tf-kill-chief", TF,
                                 [("if step % a.ckpt_every == 0:", "if step % (10 * a.ckpt_every) == 0:")]),
    "tf-applies-twice": ("exactly-once", "tf-kill-worker", TF,
                         [("        audit.assign_add(1.0)", "        for k in shapes:\n            params[k].assign_sub(0.05 * "
                           "moms[k])\n        audit.assign_add(1.0)\n        audit.assign_add(1.0)")]),
    "tf-never-times-out": ("no-silent-hang", "tf-pause-past-bound", TF,
                           [("    dog = watchdog(a.step_timeout_s)", "    dog = watchdog(0.0)")]),
}


def pause_past_bound(out: Path, job: str) -> Path:
    """A pause (75 s) longer than the hang bound (60 s): the real DDP job's collective times out
    after 5 s and torchrun restarts the group within the bound, and the real TF chief's watchdog
    exits after 30 s; a job with neither waits out the whole pause in silence."""
    source = "ddp-pause-rank" if job == "ddp" else "tf-pause-ps"
    sc = yaml.safe_load((REPO / "scenarios" / f"{source}.yaml").read_text())
    sc["name"] = f"{job}-pause-past-bound"
    sc["faults"][0]["duration_s"] = 75
    sc["expect"] = {"checks": ["no-silent-hang"]}
    p = out / f"{sc['name']}.yaml"
    p.write_text(only_text(yaml.safe_dump(sc), "a planted hang: only no-silent-hang is the bug's check"))
    return p


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_a_planted_job_bug_fails_its_check(tmp_path: Path, bug: str) -> None:
    check, scenario, script, patch = PLANTED[bug]
    root = mutant_copy(tmp_path / "code", {script: patch})
    job = scenario.split("-")[0]
    path = pause_past_bound(tmp_path, job) if scenario.endswith("-pause-past-bound") \
        else REPO / "scenarios" / f"{scenario}.yaml"
    code, rep, out = run_scenario(root, path, tmp_path / "out", seed=1, timeout=500)
    assert code == 1 and rep.get("verdict") == "fail", out
    v = rep["checks"][check]
    assert v["valid"] is False, (check, v)
