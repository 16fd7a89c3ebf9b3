"""`pschaos sim sweep SPEC.yaml --out DIR`: a grid of scale runs in parallel, and their aggregate.

A spec (examples in scenarios/sweeps/):

    name: scale-out
    base: {shards: 16, copies: 3, hours: 1, failures: llama3, param_mb: 200}
    grid: {workers: [64, 256, 1024, 4096], shards: [16, 64]}
    seeds: 3                       # or a list of seeds
    plots:
      - {x: workers, y: steps_per_simulated_s, series: shards}

`base` and `grid` take every `pschaos sim scale` setting (harness/backends/sim/scale/build.py). A plot's
`y` is a figure of scale.json (dotted for nested ones: `failover_ms.p99`) or a derived one:
`p_shard_loss` (the fraction of shards that lost every in-sync copy at once), `markov_p_shard_loss`
(the closed-form chance of that, harness/backends/sim/scale/markov.py, for exponential failures and
repairs), `p_acked_loss` (the fraction whose restore lost acknowledged updates),
`spurious_failovers_per_h`, `time_to_target_h`. Each grid point's figure is the mean over its seeds.
Runs go to DIR/runs/, the aggregate to DIR/sweep.json and DIR/report.html.
"""
from __future__ import annotations

import itertools
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import yaml

from pschaos.harness.errors import HarnessError
from pschaos.harness.backends.sim.scale.build import KEYS, build
from pschaos.harness.backends.sim.scale.markov import binomial_sigma, p_loss

SCHEMA = "pschaos.sweep/1"
DERIVED = ("p_shard_loss", "markov_p_shard_loss", "p_acked_loss", "spurious_failovers_per_h", "time_to_target_h")


def load(path: Path) -> dict:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise HarnessError(f"{path}: cannot read the sweep spec: {e}") from None
    if not isinstance(doc, dict):
        raise HarnessError(f"{path}: a sweep spec is a mapping with name, base, grid, seeds, plots")
    extra = set(doc) - {"name", "description", "base", "grid", "seeds", "plots"}
    if extra:
        raise HarnessError(f"{path}: unknown key(s) {sorted(extra)}; use name, description, base, grid, seeds, plots")
    base, grid = doc.get("base") or {}, doc.get("grid") or {}
    if not isinstance(base, dict) or not isinstance(grid, dict) or not grid:
        raise HarnessError(f"{path}: base must be a mapping and grid a non-empty mapping of setting -> list")
    for k, v in grid.items():
        if k == "seed":
            raise HarnessError(f"{path}: grid.seed: seeds are the sweep's own `seeds` key (a count or a list)")
        if k not in KEYS:
            raise HarnessError(f"{path}: grid.{k} is not a setting; known: {', '.join(KEYS)}")
        if not isinstance(v, list) or not v:
            raise HarnessError(f"{path}: grid.{k} must be a non-empty list of values")
    seeds = doc.get("seeds", 1)
    seeds = list(range(1, seeds + 1)) if isinstance(seeds, int) else seeds
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise HarnessError(f"{path}: seeds must be a count or a list of whole numbers")
    plots = doc.get("plots") or [{"x": next(iter(grid)), "y": "steps_per_simulated_s"}]
    for i, p in enumerate(plots):
        if not isinstance(p, dict) or "x" not in p or "y" not in p:
            raise HarnessError(f"{path}: plots[{i}] needs x and y (and may name series)")
        for axis in ("x", "series"):
            if p.get(axis) is not None and p[axis] not in grid:
                raise HarnessError(f"{path}: plots[{i}].{axis}={p[axis]!r} must be a grid setting: {sorted(grid)}")
        try:
            [number(v) for v in grid[p["x"]]]
        except HarnessError:
            raise HarnessError(f"{path}: plots[{i}].x={p['x']!r} has values {grid[p['x']]} that are not numbers or "
                               f"distributions; plot it as `series` and put a numeric setting on x") from None
        if p["y"] not in known_figures():
            raise HarnessError(f"{path}: plots[{i}].y={p['y']!r} is not a figure; use one of "
                               f"{', '.join(sorted(known_figures()))}")
    points = [dict(zip(grid, vals)) for vals in itertools.product(*grid.values())]
    for pt in points:           # every point must build before anything runs
        build({**base, **pt, "seed": seeds[0]}, f"{path}: point {pt}")
    return {"name": doc.get("name") or path.stem, "description": doc.get("description", ""), "base": base,
            "grid": grid, "seeds": seeds, "plots": plots, "points": points}


def known_figures() -> set[str]:
    """Every figure a plot may name: the numbers of a scale.json (dotted for nested ones), found
    on a tiny run, and the derived ones."""
    global _KNOWN
    if _KNOWN is None:
        res = _one({"workers": 2, "shards": 2, "hours": 0.001, "failures": "none"}, None)

        def walk(d: dict, pre: str) -> set[str]:
            out: set[str] = set()
            for k, v in d.items():
                if k in ("spec", "settings", "series", "incidents", "timings"):
                    continue
                if isinstance(v, dict):
                    out |= walk(v, f"{pre}{k}.")
                elif v is None or isinstance(v, (int, float)) and not isinstance(v, bool):
                    out.add(pre + k)
            return out
        _KNOWN = walk(res, "") | set(DERIVED)
    return _KNOWN


_KNOWN: set[str] | None = None


def _one(settings: dict, cal_path: str | None) -> dict:
    from pschaos.harness.backends.sim.calibration import DEFAULT_PATH, Calibration
    from pschaos.harness.backends.sim.scale.engine import ScaleRun

    path = cal_path or str(DEFAULT_PATH)
    return ScaleRun(build(settings), Calibration.load(path), cal_path=path).run()


def number(v: Any) -> float:
    """A grid value on a plot's axis: a number, or a distribution's mean (`exp:1800` -> 1800)."""
    from pschaos.harness.backends.sim.scale.failures import Dist

    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return Dist.parse(str(v), "grid value").mean


def figure(res: dict, y: str) -> float | None:
    """A plotted figure of one run: a scale.json key (dotted) or a derived one."""
    sp = res["spec"]
    if y == "p_shard_loss":
        return res["orphaned_shards"] / sp["shards"]
    if y == "p_acked_loss":
        return res["shards_lost"] / sp["shards"]
    if y == "markov_p_shard_loss":
        return markov_for(res)
    if y == "spurious_failovers_per_h":
        return res["spurious_failovers"] / sp["hours"]
    if y == "time_to_target_h":
        t = res.get("time_to_target_s")
        return None if t is None else t / 3600
    v: Any = res
    for part in y.split("."):
        if not isinstance(v, dict) or part not in v:
            return None
        v = v[part]
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def markov_for(res: dict) -> float | None:
    """The closed-form chance that one shard lost every copy within the run, from its settings:
    failure rate 1/MTBF, repair rate 1/(repair + restart + catch-up)."""
    from pschaos.harness.backends.sim.scale.failures import Dist

    f = res["spec"]["failures"]
    if not f.get("server_mtbf_h"):
        return 0.0
    mtbf, repair = Dist.parse(f["server_mtbf_h"], "server_mtbf"), Dist.parse(f["server_repair_s"], "server_repair")
    if mtbf.kind != "exp" or repair.kind != "exp":
        return None              # the chain's closed form holds for exponential failures and repairs only
    lam = 1 / (mtbf.mean * 3600)
    back = repair.mean + res["timings"].get("restart_s", 0.0)
    return p_loss(res["spec"]["copies"], lam, 1 / back, res["simulated_s"])


def aggregate(spec: dict, runs: list[dict]) -> dict:
    """One row per grid point: the mean of each plotted figure over its seeds' runs (a run says
    which point it is, `point_index`)."""
    rows = []
    for i, pt in enumerate(spec["points"]):
        mine = [r for r in runs if r.get("point_index") == i]
        row = {"point": pt, "at": {k: _maybe_number(v) for k, v in pt.items()}, "seeds": len(mine)}
        ys = [p["y"] for p in spec["plots"]]
        if "p_shard_loss" in ys:            # the closed form beside the measured fraction
            ys.append("markov_p_shard_loss")
        for y in dict.fromkeys(ys):
            vals = [v for v in (figure(r, y) for r in mine) if v is not None]
            row[y] = sum(vals) / len(vals) if vals else None
        if any(y in ("p_shard_loss", "markov_p_shard_loss") for y in ys) and mine:
            groups = sum(r["spec"]["shards"] for r in mine)
            row["p_shard_loss_sigma"] = binomial_sigma(row.get("p_shard_loss") or 0.0, groups)
        rows.append(row)
    return {"schema": SCHEMA, "name": spec["name"], "description": spec["description"], "base": spec["base"],
            "grid": spec["grid"], "seeds": spec["seeds"], "plots": spec["plots"], "rows": rows}


def _maybe_number(v: Any) -> float | None:
    try:
        return number(v)
    except HarnessError:
        return None


def _one_sent(settings: dict, cal_text: str | None, cal_path: str | None = None) -> dict:
    """_one on a Ray node: the calibration travels as text (the driver's file is not there); the
    result names the driver's file, as a run here would."""
    import tempfile

    if cal_text is None:
        return _one(settings, None)
    with tempfile.TemporaryDirectory(prefix="pschaos-sweep-cal-") as tmp:
        path = Path(tmp) / "calibration.json"
        path.write_text(cal_text)
        res = _one(settings, str(path))
    for k in ("calibration", "rerun"):
        if isinstance(res.get(k), str) and cal_path:
            res[k] = res[k].replace(str(path), cal_path)
    return res


def run_sweep(spec_path: Path, out: Path, jobs: int, cal_path: str | None, on: tuple[bool, str | None] = (False, None)
              ) -> int:
    """The grid's runs `jobs` at a time here, or as Ray tasks (`on`: (True, ADDRESS or None for a
    local cluster of `jobs` CPUs)); the same settings and seeds give the same runs either way."""
    spec = load(spec_path)
    jobs = jobs or os.cpu_count() or 1
    (out / "runs").mkdir(parents=True, exist_ok=True)
    todo = [({**spec["base"], **pt, "seed": s}, n, i) for n, (i, pt, s) in
            enumerate((i, pt, s) for i, pt in enumerate(spec["points"]) for s in spec["seeds"])]
    t0, runs = time.monotonic(), []
    say = (lambda m: print(m, file=sys.stderr, flush=True))
    say(f"sweep {spec['name']}: {len(todo)} runs ({len(spec['points'])} points x {len(spec['seeds'])} seeds), "
        + ("as Ray tasks" if on[0] else f"{jobs} at a time"))

    def took(n: int, settings: dict, k: int, i: int, res: dict) -> None:
        res["settings"], res["point_index"] = settings, i
        (out / "runs" / f"{k:04d}.json").write_text(json.dumps(res) + "\n")
        runs.append(res)
        say(f"  [{n}/{len(todo)}] {settings} -> {res['wall_s']} s wall, {res['failovers']} failovers")
    if on[0]:
        from pschaos.harness.fanout.ray_runs import RayPool

        cal_text = Path(cal_path).read_text() if cal_path else None
        with RayPool(on[1], jobs, "sim", say) as ray_pool:
            ray_pool.map(_one_sent, [(settings, cal_text, cal_path) for settings, _, _ in todo],
                         lambda j, res: took(len(runs) + 1, todo[j][0], todo[j][1], todo[j][2], res))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futs = {pool.submit(_one, settings, cal_path): (settings, k, i) for settings, k, i in todo}
            for n, fut in enumerate(as_completed(futs), 1):
                settings, k, i = futs[fut]
                took(n, settings, k, i, fut.result())
    runs.sort(key=lambda r: (r["point_index"], r["settings"].get("seed", 0)))
    agg = aggregate(spec, runs)
    agg["wall_s"] = round(time.monotonic() - t0, 2)
    (out / "sweep.json").write_text(json.dumps(agg, indent=2) + "\n")
    from pschaos.reports.scale import write_sweep
    write_sweep(agg, out / "report.html")
    say(f"sweep {spec['name']}: {len(todo)} runs in {agg['wall_s']} s -> {out / 'sweep.json'}, {out / 'report.html'}")
    return 0
