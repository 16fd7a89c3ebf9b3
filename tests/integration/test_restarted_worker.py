"""Bug 4.1: a restarted worker reused its request ids, so its new pushes were acked as
duplicates of the old process's and never applied, and the run said PASS with lost 0. The
library scenario kill-restart-worker passes on the real code and fails on a copy whose client
has no incarnation in its idempotency key (the old behaviour)."""
import pytest

from pschaos.harness.machinery.tools import REPO

from .mutants import mutant_copy, run_scenario

pytestmark = pytest.mark.integration

NO_INCARNATION = {"psnodes/client/client.py": [("self.incarnation = int(runtime.time() * 1e6)",
                                          "self.incarnation = 0   # planted: ids restart with the process")]}


@pytest.mark.parametrize("planted", [False, True], ids=["real", "ids-reused"])
def test_kill_restart_worker(tmp_path, planted):
    root = mutant_copy(tmp_path / "code", NO_INCARNATION if planted else {})
    code, rep, out = run_scenario(root, REPO / "scenarios" / "kill-restart-worker.yaml", tmp_path / "out", seed=6)
    checks = rep["checks"]
    if not planted:
        assert code == 0 and rep["verdict"] == "pass", out
        assert checks["scenario-ran"]["valid"] is True
        return
    assert code == 1, out
    assert checks["no-lost-acks"]["valid"] is False and checks["no-lost-acks"]["details"]["audit_short"], out
