"""A deadlock ends its run with a verdict and a report, never with pytest's timeout (issue 32).

The bug is planted in a temporary copy of psnodes: the barrier counts a rejoining BSP worker at
the clock its previous incarnation pushed, not at the start its new membership gives it. The
restarted worker then waits in its first pull for a floor that only its own push could raise:
bsp-kill-worker deadlocks. The runner must see the quiet (workload.stall_s, 20 s here), stop
driving, tear the cluster down and write a report whose `progress` check fails naming the
worker that waits and the pull it waits in. The same bound passes the real psnodes in
`make test` (every scenario's progress check); tests/unit/harness/run/test_stall.py proves the
runner's side in virtual time. A real cluster run of a minute or two: `make test-long`."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from pschaos.harness.machinery.tools import REPO

from .mutants import mutant_copy, run_scenario

pytestmark = [pytest.mark.integration, pytest.mark.long]

REJOINER_AT_OLD_CLOCK = ("psnodes/core/membership.py",
                         [("    return max(start, clocks.get(worker, 0))\n", "    return clocks.get(worker, 0)\n")])


def test_a_barrier_deadlock_ends_the_run_with_a_failing_progress_check(tmp_path: Path) -> None:
    root = mutant_copy(tmp_path / "code", dict([REJOINER_AT_OLD_CLOCK]))
    sc = yaml.safe_load((REPO / "scenarios" / "bsp-kill-worker.yaml").read_text())
    sc["name"] = "bsp-kill-worker-stall"
    sc["workload"]["stall_s"] = 20
    path = tmp_path / "bsp-kill-worker-stall.yaml"
    path.write_text(yaml.safe_dump(sc))
    t0 = time.monotonic()
    code, rep, out = run_scenario(root, path, tmp_path / "out", seed=1, timeout=280)
    assert rep, out                                      # a report, whatever went wrong
    assert time.monotonic() - t0 < 250, "the run was ended by its time limit, not by the stall"
    p = rep["checks"]["progress"]
    assert code == 1 and rep["verdict"] == "fail" and p["valid"] is False, (p, out)
    waiting = p["details"]["waiting"]
    assert any(w.get("in_flight") for w in waiting.values()), waiting      # who waits, and in what
