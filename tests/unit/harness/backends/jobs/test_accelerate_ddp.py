"""The accelerate-ddp job's contract: its launch line, its isolation from a user's Accelerate
config, the per-round process group by default, and a clear error without Accelerate."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pschaos.harness.backends.jobs import accelerate_ddp
from pschaos.harness.backends.jobs.accelerate_ddp import AccelerateDDP
from pschaos.harness.backends.jobs.api import JobEnv
from pschaos.harness.backends.systems import system_named
from pschaos.harness.errors import HarnessError
from pschaos.harness.run.scenario import Scenario

HAS_ACCELERATE = Path(sys.executable).with_name("accelerate").is_file()


def job(tmp_path, **opt) -> AccelerateDDP:
    options = {k: v for k, (_, v) in AccelerateDDP.options.items()} | opt
    return AccelerateDDP(JobEnv(tmp_path, 2, 90, 0.01, options))


@pytest.mark.skipif(not HAS_ACCELERATE, reason="needs `accelerate` beside this Python (pip install 'pschaos[accelerate]')")
def test_the_launch_line_starts_n_ranks_through_the_elastic_agent_on_loopback(tmp_path):
    j = job(tmp_path, nproc=2, max_restarts=4)
    line = j.launch()["agent"]
    assert line[:2] == [str(Path(sys.executable).with_name("accelerate")), "launch"]
    assert "--multi_gpu" in line and line[line.index("--num_processes") + 1] == "2"
    assert line[line.index("--max_restarts") + 1] == "4"
    assert line[line.index("--main_process_port") + 1] == str(j.store_port)
    script = line.index(str(accelerate_ddp.SCRIPT))
    assert "--cpu" in line[script:] and "--cpu" not in line[:script]      # the script's flag, not the launcher's
    assert "--group-per-round" in line and line[line.index("--seed") + 1] == "2"
    assert "--group-per-round" not in job(tmp_path, group_per_round=False).launch()["agent"]


def test_a_users_accelerate_config_cannot_reach_the_run(tmp_path):
    home = job(tmp_path).environment("agent")["HF_HOME"]
    assert Path(home).is_dir() and Path(home).is_relative_to(tmp_path)


def test_without_accelerate_the_run_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(accelerate_ddp.sys, "executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(HarnessError, match=r"pip install 'pschaos\[accelerate\]'"):
        job(tmp_path).launch()


def test_the_roles_and_the_checks_are_the_torchrun_jobs():
    sc = Scenario.model_validate({"name": "a", "system": "accelerate-ddp", "workload": {"steps": 40},
                                  "faults": [{"at": {"step": 10}, "kind": "kill", "target": "rank-2"}]})
    assert sc.system_options["group_per_round"] is True and "shared_store" not in sc.system_options
    assert AccelerateDDP.role_names(sc.system_options) == ["agent", "rank-0", "rank-1", "rank-2"]
    with pytest.raises(HarnessError, match="local processes only"):
        system_named("accelerate-ddp").backend_factory("docker")
