"""`pschaos hunt --on ray`: the search's trials as Ray tasks (harness/fanout/ray_runs.py RayPool).

Each trial travels as its scenario dumped whole (every field, the expect's tuning included: it
loads back to the same model), runs as `pschaos run` on a node
that lacks nothing for its backend, and comes back as a local soak run's does; its report is
read back as the in-process runner's would be. A trial whose report did not come back is
unknown with the reason, as a run that raised is here.
"""
from __future__ import annotations

import json
from pathlib import Path

from pschaos.harness.fanout.ray_runs import RayPool
import yaml

from pschaos.harness.proof.hunt.hunt import Batch
from pschaos.harness.proof.soak.soak import RunResult, judge_run

TRIAL_TIMEOUT_S = 900.0


def ray_batch(pool: RayPool, timeout_s: float = TRIAL_TIMEOUT_S) -> Batch:
    """A hunt's `batch`: the trials on the pool, each (report, error, wall seconds) in their order."""
    def batch(items: list) -> list[tuple[dict, str | None, float]]:
        dirs: dict[int, Path] = {seed: d for _, seed, d in items}
        jobs = [(seed, 1, sc.name, yaml.safe_dump(sc.model_dump(mode="json", exclude_unset=True), sort_keys=False))
                for sc, seed, _ in items]
        by_seed = {r.seed: r for r in pool.run(jobs, lambda s, k: dirs[s], timeout_s, RunResult, judge_run)}
        out = []
        for _, seed, d in items:
            r, rep = by_seed[seed], d / "report.json"
            if rep.is_file():
                out.append((json.loads(rep.read_text()), None, r.wall_s))
            else:
                out.append(({"verdict": "unknown"}, r.reason or "its run left no report.json", r.wall_s))
        return out
    return batch
