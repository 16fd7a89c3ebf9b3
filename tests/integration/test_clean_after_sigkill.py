"""SIGKILL a running harness mid-fault; `pschaos clean` then leaves nothing behind."""
import json
import signal
import subprocess
import sys
import time

import pytest

from pschaos.harness.machinery.procs import tagged_processes, wait_until
from pschaos.harness.machinery.tools import REPO, find
from pschaos.netfaults.nft import delete_table, tables

from .sigkill import await_fault, reap_run, sigkill_then_clean, start_run

pytestmark = pytest.mark.xdist_group("pschaos-clean")       # `pschaos clean` is machine-wide: one at a time (tests/unit/test_xdist_groups.py)

SCENARIO = """name: killed-harness
cluster: {shards: 1, copies: 2, workers: 1, model: mlp}
workload: {steps: 5000}
faults:
  - at: {time: 0.5}
    kind: loss
    target: workers -> nodes
    params: {percent: 5}
    duration_s: 120
"""


@pytest.mark.skipif(find("toxiproxy-server") is None or find("nft") is None,
                    reason="toxiproxy-server (make install) and nft (apt-get install nftables) are needed")
def test_sigkilled_harness_is_cleaned_up(tmp_path):
    harness = start_run(SCENARIO, tmp_path, "killed-harness")
    run_id = None
    try:
        run_id = await_fault(tmp_path)
        # What the kill will leave, counted while the owner lives: once it is dead, a `pschaos
        # clean` of a test running in parallel may reap it before this test looks.
        left = tagged_processes(run_id)
        names = {" ".join(p.cmdline()[:3]) for p in left}
        assert len(left) >= 4, names                     # etcd, toxiproxy, two nodes, a worker
        assert [t for t in tables() if run_id.replace("-", "_") in t], "the run's nftables table is missing"
        sigkill_then_clean(harness, run_id)
    finally:
        reap_run(harness, run_id)


def test_ctrl_c_tears_everything_down_without_clean(tmp_path):
    """SIGINT (Ctrl-C) mid-fault: the harness heals, stops and removes all it made by itself.

    The harness starts with SIGINT ignored, as a background job of a non-interactive shell does
    (`make test &`, CI runners): Python keeps an inherited SIG_IGN, and a harness that relied on
    Python's default handler ignored this Ctrl-C and kept running with its nftables table."""
    if find("toxiproxy-server") is None or find("nft") is None:
        pytest.skip("toxiproxy-server (make install) and nft (apt-get install nftables) are needed")
    sc = tmp_path / "interrupted.yaml"
    sc.write_text(SCENARIO.replace("killed-harness", "interrupted"))
    out = tmp_path / "out"
    harness = subprocess.Popen([sys.executable, "-m", "pschaos.harness.commands.cli", "run", str(sc), "--out", str(out), "--quiet"],
                               cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    hist = out / "run" / "events" / "harness.jsonl"
    run_id = None
    try:
        assert wait_until(lambda: hist.exists() and "fault-start" in hist.read_text(), 60, 0.1)
        run_id = json.loads(hist.read_text().splitlines()[0])["value"]["run_id"]
        harness.send_signal(signal.SIGINT)
        _, err = harness.communicate(timeout=60)
        assert harness.returncode == 130 and "interrupted" in err
        assert tagged_processes(run_id) == []
        assert not [t for t in tables() if run_id.replace("-", "_") in t]
    finally:
        if harness.poll() is None:
            harness.kill()
        if run_id is not None:          # a failed assertion must not leave debris for later tests
            for p in tagged_processes(run_id):
                p.kill()
            for t in tables():
                if run_id.replace("-", "_") in t:
                    delete_table(t)
