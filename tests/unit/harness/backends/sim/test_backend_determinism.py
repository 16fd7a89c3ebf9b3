"""A library scenario through the runner on --backend sim replays byte for byte from its seed.

kill-primary, shortened (the same cluster, workers and fault, fewer steps, checkpoints more often), runs twice in this
process and once in a subprocess with another PYTHONHASHSEED: the three history.jsonl files are
byte-identical, so neither the OS scheduler nor set or dict iteration order over strings leaks
into a simulated run. So does migration-kill-source-primary, shortened: a scale-out whose
coordinator runs in a simulated thread, new shard groups, and a kill timed against the copy.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pschaos.harness.machinery.tools import REPO
from pschaos.harness.run.runner import Runner
from pschaos.harness.run.scenario import load_scenario

ROOT = REPO
SEED = 5


def short_kill_primary(tmp: Path) -> Path:
    spec = yaml.safe_load((ROOT / "scenarios" / "kill-primary.yaml").read_text())
    spec["workload"]["steps"] = 160
    spec["cluster"]["checkpoint_interval_s"] = 0.5     # a checkpoint before the short run ends
    spec["faults"][0]["at"] = {"step": 60}
    path = tmp / "kill-primary-short.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def short_migration(tmp: Path) -> Path:
    spec = yaml.safe_load((ROOT / "scenarios" / "migration-kill-source-primary.yaml").read_text())
    spec["workload"]["steps"] = 160
    spec["cluster"]["checkpoint_interval_s"] = 0.5     # a checkpoint before the short run ends
    for f in spec["faults"]:
        f["at"] = {"step": 40}
    spec["faults"][0]["params"]["hold_s"] = 1.0
    spec["faults"][1]["duration_s"] = 1.0
    path = tmp / "migration-kill-source-primary-short.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run_here(path: Path, out: Path) -> dict:
    return Runner(load_scenario(path), SEED, out, backend="sim", quiet=True).run()


RUN_IN_SUBPROCESS = """
import sys
from pathlib import Path
from pschaos.harness.run.runner import Runner
from pschaos.harness.run.scenario import load_scenario
rep = Runner(load_scenario(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), backend="sim", quiet=True).run()
print(rep["verdict"])
"""


@pytest.mark.parametrize("make, happened", [
    (short_kill_primary, (b'"f": "promote"', b'"f": "fault-start"')),                  # it did fail over
    (short_migration, (b'"f": "migration-switch"', b'"caught_migrating": "copy"', b'"epoch": 2')),
], ids=["kill-primary", "migration-kill-source-primary"])
def test_same_seed_same_history_bytes_in_process_and_under_another_hash_seed(tmp_path: Path, make, happened) -> None:
    path = make(tmp_path)
    a, b = run_here(path, tmp_path / "a"), run_here(path, tmp_path / "b")
    assert a["verdict"] == b["verdict"] == "pass", (a["checks"], a.get("unknown_reasons"))
    ha, hb = (tmp_path / "a" / "history.jsonl").read_bytes(), (tmp_path / "b" / "history.jsonl").read_bytes()
    assert ha == hb
    assert all(x in ha for x in happened), [x for x in happened if x not in ha]

    hash_seed = "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "4343"
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run([sys.executable, "-c", RUN_IN_SUBPROCESS, str(path), str(SEED), str(tmp_path / "c")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "pass"
    assert (tmp_path / "c" / "history.jsonl").read_bytes() == ha

