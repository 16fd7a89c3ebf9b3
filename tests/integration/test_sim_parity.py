"""One core, two shells (issue 8): a decision bug planted in pschaos.psnodes.core fails the same scenario
on real processes and in the simulator, because both shells run that very core.

The planted bug: sync mode acks a push before every in-sync replica applied it. Cut off from its
replicas, such a primary goes on acking what the replicas never get; they elect a new primary and
those acks are lost. The real core stops acking instead, so the scenario passes without the bug.
"""
from __future__ import annotations

import pytest

from pschaos.harness.machinery.tools import REPO

from .mutants import mutant_copy, run_scenario

pytestmark = pytest.mark.integration

EARLY_ACK = {"psnodes/core/ack.py": [(
    "    return all(r.peer_seq.get(p, 0) >= seq for p in r.isr if p != r.me)",
    "    return r.mode == \"sync\" or all(r.peer_seq.get(p, 0) >= seq for p in r.isr if p != r.me)  # planted")]}
SCENARIO = REPO / "scenarios" / "partition-primary-replicas.yaml"


# [sim] runs in `make test-long`: in `make test`, test_selftest.py's selftest kills this very patch
# (the zoo's sync-early-ack) on partition-primary-replicas at seed 1 on the twin, by no-lost-acks
@pytest.mark.parametrize("backend", ["process", pytest.param("sim", marks=pytest.mark.long)])
def test_a_planted_ack_bug_fails_the_scenario_on_both_backends(tmp_path, backend):
    root = mutant_copy(tmp_path / "code", EARLY_ACK)
    code, rep, out = run_scenario(root, SCENARIO, tmp_path / "out", seed=1, backend=backend)
    assert rep, out
    assert rep["backend"] == backend
    assert code == 1 and rep["verdict"] == "fail", out
    lost = rep["checks"]["no-lost-acks"]
    assert lost["valid"] is False and rep["metrics"]["lost_acked_updates"] > 0, lost


# Without the bug the same scenario passes in the simulator: `make test`'s library pass on the twin
# runs scenarios/partition-primary-replicas.yaml at seed 1, the very run this module once made again.
