"""`pytest --pschaos-on ray[=ADDRESS]`: each scenario item runs as a Ray task, not in this process.

The scenario travels as YAML (after a conftest's `pytest_pschaos_modify_scenario`: the model
dumped as it stands, which loads back to the same model for every file of the library), runs as
`pschaos run` on a node that lacks nothing for the backend (harness/fanout/ray_runs.py RayPool),
and its files come back into the item's output folder; the item passes or fails on that
report.json exactly as on a run made here. One pool per pytest process (each xdist worker has
its own: with ADDRESS they share the cluster; without, each starts a local one on 127.0.0.1),
closed when pytest ends. A task that brought no report back fails the item with the reason.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

POOL_KEY = "_pschaos_ray_pool"
TASK_TIMEOUT_S = 3600.0           # pytest's own timeout, when set, ends an item first


def run_on_ray(config: pytest.Config, sc, seed: int, backend: str, out: Path) -> dict:
    """The item's run on the cluster: its report, read back from `out`."""
    from pschaos.harness.errors import HarnessError
    from pschaos.harness.fanout.nodes import run_needs
    from pschaos.harness.fanout.ray_runs import RayPool, parse_on
    from pschaos.harness.proof.soak.soak import RunResult, judge_run

    pool = getattr(config, POOL_KEY, None)
    if pool is None:
        on = parse_on(config.getoption("pschaos_on"))
        if isinstance(on, str):
            raise pytest.UsageError(f"--pschaos-on: {on}")
        try:
            pool = RayPool(on[1], 2, backend).__enter__()
        except HarnessError as e:
            raise pytest.UsageError(f"--pschaos-on {config.getoption('pschaos_on')}: {e}") from None
        setattr(config, POOL_KEY, pool)
    text = yaml.safe_dump(sc.model_dump(mode="json", exclude_unset=True), sort_keys=False)
    needs = run_needs(text, backend)
    if (allowed := pool.allowed(needs)) is not None and not allowed:     # as a local run without them skips
        pytest.skip(f"{sc.name}: {pool.unplaceable(needs)}")
    (r,) = pool.run([(seed, 1, sc.name, text)], lambda s, k: out, TASK_TIMEOUT_S, RunResult, judge_run,
                    command=lambda s, d: f"pschaos run {sc.name} --backend {backend} --seed {s} --out {d}")
    report = out / "report.json"
    if not report.is_file():
        pytest.fail(f"scenario {sc.name} (seed {seed}, {backend}, on Ray): no report came back: {r.reason}; "
                    f"its log: {out / 'soak-run.log'}", pytrace=False)
    return json.loads(report.read_text())


def close(config: pytest.Config) -> None:
    """Leave the cluster (stop a local one) at the end of pytest."""
    pool = getattr(config, POOL_KEY, None)
    if pool is not None:
        setattr(config, POOL_KEY, None)
        pool.__exit__(None, None, None)
