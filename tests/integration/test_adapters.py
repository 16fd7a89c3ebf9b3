"""Adapted systems on real parts: the complete adapter example of docs/adapters.md, run as written against
real redis-server processes, and a SIGKILLed harness whose Redis and Sentinel processes and
nftables table `pschaos clean` reaps. (The library's redis-* and etcd-store-* scenarios run as
scenario items in `make test`.)"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from pschaos.harness.machinery import registry
from pschaos.harness.machinery.procs import tagged_processes
from pschaos.harness.run.runner import Runner
from pschaos.harness.run.scenario import Scenario
from pschaos.harness.machinery.tools import REPO, find

from .sigkill import await_fault, reap_run, run_tables, sigkill_then_clean, start_run

needs_redis = pytest.mark.skipif(find("redis-server") is None or find("redis-sentinel") is None,
                                 reason="redis-server and redis-sentinel are needed (make system-deps)")


def readme_example() -> tuple[str, str]:
    """The adapter and the scenario of docs/adapters.md, the user's page on their own systems."""
    section = (REPO / "docs" / "adapters.md").read_text()
    return (re.search(r"```python\n(.*?)```", section, re.S).group(1),
            re.search(r"```yaml\n(.*?)```", section, re.S).group(1))


@needs_redis
def test_the_documented_adapter_runs_as_written_and_finds_the_empty_master_wiping_its_replicas(tmp_path, monkeypatch):
    code, scenario = readme_example()
    (tmp_path / "mymodule.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    sc = Scenario.model_validate(yaml.safe_load(scenario))
    rep = Runner(sc, 1, tmp_path / "out", "process", quiet=True).run()
    checks = {k: v["valid"] for k, v in rep["checks"].items()}
    lost = rep["checks"]["no-lost-updates"]["details"]
    assert checks["no-lost-updates"] is False and lost["lost"] > 0, lost
    assert checks["counters-match"] is True and checks["scenario-ran"] is True, checks
    assert all(e["acked_by_node"] == "shard-0/0" for e in lost["examples"])
    assert (tmp_path / "out" / "lost-updates.jsonl").read_text().count("\n") == lost["lost"]   # every one, not 20


SCENARIO = """name: killed-redis-harness
system: redis-sentinel
cluster: {shards: 1, copies: 3, workers: 1}
workload: {duration_s: 120, step_delay_s: 0.01}
faults:
  - {at: {time: 0.5}, kind: partition, target: primary(shard=0) <-> replicas(shard=0), duration_s: 100}
expect: {checks: [no-lost-updates]}
"""


@pytest.mark.xdist_group("pschaos-clean")
@needs_redis
@pytest.mark.skipif(find("nft") is None, reason="nft is needed (apt-get install nftables)")
@pytest.mark.parametrize("deep", [False, True], ids=["sockets-in-run", "sockets-under-tmp"])
def test_a_sigkilled_harness_leaves_no_redis_process_or_rule_that_clean_does_not_reap(tmp_path, deep):
    """`deep`: a run folder too deep for a socket's name puts the sockets under /tmp; clean removes them.
    The shallow case starts from a short folder of its own: pytest's tmp_path varies in length
    (pytest-NNN/popen-gwN/<test name>) and can itself be too deep for a socket's name."""
    short = Path(tempfile.mkdtemp(prefix="pk-"))
    where = tmp_path / ("d" * 60) if deep else short
    where.mkdir(exist_ok=True)
    harness = start_run(SCENARIO, where, "killed-redis-harness")
    run_id = None
    try:
        run_id = await_fault(where)
        left = tagged_processes(run_id)
        names = " ".join(" ".join(p.cmdline()[:1]) for p in left)
        assert len(left) == 6 and "redis-sentinel" in names, names      # 3 servers, 3 Sentinels
        assert run_tables(run_id), "the partition's nftables table is missing"
        folders = json.loads((registry.DIR / f"{run_id}.json").read_text())["folders"]
        assert bool(folders) == deep and all(Path(f).is_dir() for f in folders), folders
        sigkill_then_clean(harness, run_id)
        assert not any(Path(f).exists() for f in folders), folders
    finally:
        reap_run(harness, run_id)
        shutil.rmtree(short, ignore_errors=True)
