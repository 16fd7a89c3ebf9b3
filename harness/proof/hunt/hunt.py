"""`pschaos hunt SCENARIO --budget N`: random fault schedules until one fails, then shrink it.

The scenario gives the cluster and the checks; the hunt replaces its faults with schedules drawn
from a FaultSpace (harness/proof/hunt/space.py) seeded by `--seed`, runs each (by default on the
simulator, where a run costs seconds and replays byte for byte), and at the first failure
shrinks the schedule (harness/proof/hunt/shrink.py) and writes it as a scenario file that reproduces
the failure with its seed, ready to commit as a regression test. With `--confirm` (the default
when hunting on the simulator) the shrunk scenario is then run on the real backend and the
report says whether it failed there too.

Only safety checks judge a hunt: a random schedule says nothing about a time budget, a baseline
or a scenario's own metric bounds (`failovers >= 1` means nothing when no primary was hit), so
those are dropped and a failure is always a broken guarantee. A run that ends `unknown` is
counted and reported, never taken for a failure or a pass.
"""
from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import yaml

from pschaos.harness.backends.cluster import ClusterSpec
from pschaos.harness.run.scenario import Fault, Scenario, Workload
from pschaos.harness.proof.hunt.shrink import Shrunk, shrink
from pschaos.harness.proof.hunt.space import FaultSpace

SAFETY = ("no-lost-acks", "single-primary", "exactly-once", "replicas-match", "delta-complete", "pulled-copy-matches",
          "monotone-reads", "staleness", "checkpoints-atomic", "checkpoints-monotone", "losses-accounted",
          "acks-durable", "reads-committed", "lag-bounded", "best-promoted", "checkpoint-loads", "handoff-continuity",
          "ownership-exact")
# safety checks whose evidence depends on the schedule's timing: a kill before the first checkpoint
# owes no load, a drawn fault may depose no primary
NOT_ALWAYS_EVIDENCED = ("best-promoted", "checkpoint-loads")
Run = Callable[[Scenario, int, Path], dict]


@dataclass
class Trial:
    index: int
    seed: int
    faults: list[Fault]
    verdict: str
    failed: list[str] = field(default_factory=list)       # the safety checks that failed
    wall_s: float = 0.0
    error: str | None = None                               # the run raised: unknown, with this reason
    unknown: list[str] = field(default_factory=list)       # the checks that could not decide


def safe_run(run: "Run", sc: Scenario, seed: int, out: Path) -> tuple[dict, str | None]:
    """One run whose crash is evidence, not the end of the hunt: (report, error)."""
    try:
        return run(sc, seed, out), None
    except KeyboardInterrupt:
        raise
    except Exception as e:  # noqa: BLE001 - a run that raised (no primary elected, a twin bug) is unknown
        return {"verdict": "unknown"}, f"{type(e).__name__}: {e}"


def hunt_scenario(base: Scenario, faults: list[Fault], cluster: ClusterSpec | None = None,
                  duration_s: float = 18.0, name: str | None = None, description: str = "") -> Scenario:
    """`base` with these faults instead of its own, a workload bounded by `duration_s`, and only
    its safety checks (module docstring)."""
    cl = cluster or base.cluster
    sc = Scenario(name=name or f"{base.name}-hunt", description=description, cluster=cl,
                  workload=Workload(steps=1_000_000, duration_s=duration_s, step_delay_s=base.workload.step_delay_s),
                  faults=faults, nemesis=None,
                  expect=base.expect.model_copy(update={"checks": [], "exclude": {}, "finds": [], "may_find": [],
                                                        "metrics": []}))
    # the safety checks that apply to the faults drawn (not to the base scenario's), less those whose
    # evidence a random schedule may never produce (an election, a load): their unknown is no finding
    checks = [c for c in sc.selection().checks if c in SAFETY and c not in NOT_ALWAYS_EVIDENCED] or \
        ["no-lost-acks", "single-primary", "exactly-once"]
    return sc.model_copy(update={"expect": sc.expect_only(checks, "a hunt judges safety only, where a random "
                                                                  "schedule always gives evidence")})


def failed_checks(report: dict) -> list[str]:
    """The safety checks the run failed: only a broken guarantee counts as a finding (nodes-back,
    the judge's own evidence check, fails for reasons a random schedule can cause by design)."""
    return sorted(k for k, v in (report.get("checks") or {}).items() if v.get("valid") is False and k in SAFETY)


def unknown_checks(report: dict) -> list[str]:
    return sorted(k for k, v in (report.get("checks") or {}).items() if v.get("valid") == "unknown")


def run_in_process(backend: str) -> Run:
    """Each trial through the runner in this process: the simulator needs no other process."""
    def run(sc: Scenario, seed: int, out: Path) -> dict:
        from pschaos.harness.run.runner import Runner

        return Runner(sc, seed, out, backend, quiet=True).run()
    return run


def to_yaml(sc: Scenario, seed: int, found: str, command: str) -> str:
    """The scenario as a committed file reads: comments say where it came from and how to replay it."""
    data = {"name": sc.name, "description": sc.description,
            "cluster": sc.cluster.model_dump(exclude_defaults=True) or {},
            "workload": sc.workload.model_dump(exclude_defaults=True),
            "faults": [f.model_dump(exclude_none=True, exclude_defaults=True) | {"at": f.at.model_dump(exclude_none=True)}
                       for f in sc.faults],
            "expect": {"checks": list(sc.expect.checks), **({"exclude": dict(sc.expect.exclude)}
                                                             if sc.expect.exclude else {})}}
    head = (f"# Found by `{found}`.\n# Replay (the simulator replays a seed deterministically): {command}\n"
            f"# seed: {seed}\n")
    return head + yaml.safe_dump(data, sort_keys=False, width=100)


@dataclass
class HuntResult:
    trials: list[Trial]
    found: Trial | None = None
    shrunk: Shrunk | None = None
    scenario_file: Path | None = None
    replay: str | None = None
    replayed: dict | None = None
    confirmed: dict | None = None
    wall_s: float = 0.0
    find_s: float = 0.0
    shrink_s: float = 0.0

    def to_json(self) -> dict:
        def fj(fs: list[Fault]) -> list[dict]:
            return [f.model_dump(exclude_none=True) for f in fs]
        verdicts: dict[str, int] = {}
        for t in self.trials:
            verdicts[t.verdict] = verdicts.get(t.verdict, 0) + 1
        return {"schema": "pschaos.hunt/1", "trials": len(self.trials), "verdicts": verdicts,
                "found": None if self.found is None else {"trial": self.found.index, "seed": self.found.seed,
                                                           "failed": self.found.failed, "faults": fj(self.found.faults)},
                "shrunk": None if self.shrunk is None else {
                    "faults": fj(self.shrunk.faults), "cluster": self.shrunk.cluster.model_dump(),
                    "runs": self.shrunk.runs, "steps": self.shrunk.steps, "budget_exhausted": self.shrunk.exhausted},
                "scenario_file": str(self.scenario_file) if self.scenario_file else None, "replay": self.replay,
                "replayed": self.replayed, "confirmed": self.confirmed, "wall_s": round(self.wall_s, 1), "find_s": round(self.find_s, 1),
                "shrink_s": round(self.shrink_s, 1),
                "unknown_trials": [{"trial": t.index, "seed": t.seed, **({"error": t.error} if t.error else {})}
                                   for t in self.trials if t.verdict == "unknown"],
                "failed_other": [{"trial": t.index, "seed": t.seed} for t in self.trials
                                 if t.verdict == "fail" and not t.failed]}


Batch = Callable[[list[tuple[Scenario, int, Path]]], list[tuple[dict, "str | None", float]]]


def hunt(base: Scenario, space: FaultSpace, budget: int, seed: int, out: Path, run: Run,
         shrink_budget: int = 40, duration_s: float = 18.0, backend: str = "sim",
         confirm: Run | None = None, confirm_backend: str = "process",
         say: Callable[[str], None] = lambda m: None, batch: Batch | None = None, width: int = 1) -> HuntResult:
    """`batch` (with `width`): the search's trials `width` at a time elsewhere (Ray: --on ray),
    each (report, error, wall seconds); they are drawn and judged in index order as one at a
    time would be, and trials run past the first failing one are dropped, so the hunt finds the
    same schedule. The shrink and the replays run here, one at a time."""
    t0 = time.monotonic()
    res = HuntResult([])
    out.mkdir(parents=True, exist_ok=True)
    width = max(1, width if batch is not None else 1)
    for first in range(0, budget, width):
        drawn = []
        for i in range(first, min(budget, first + width)):
            faults = space.draw(random.Random(f"pschaos-hunt:{seed}:{i}"))
            drawn.append((i, seed * 1000 + i, faults, hunt_scenario(base, faults, duration_s=duration_s)))
        if batch is None:
            i, run_seed, faults, sc = drawn[0]
            t1 = time.monotonic()
            got = [(*safe_run(run, sc, run_seed, out / "trials" / f"trial-{i}"), time.monotonic() - t1)]
        else:
            got = batch([(sc, run_seed, out / "trials" / f"trial-{i}") for i, run_seed, _, sc in drawn])
        for (i, run_seed, faults, _), (rep, err, wall) in zip(drawn, got):
            trial = Trial(i, run_seed, faults, rep.get("verdict", "unknown"), failed_checks(rep), round(wall, 1), err,
                          unknown_checks(rep))
            res.trials.append(trial)
            say(f"trial {i + 1}/{budget} (seed {run_seed}, {len(faults)} fault(s): "
                + ", ".join(f"{f.kind} {f.target} @{f.at.time}s" for f in faults)
                + f"): {trial.verdict.upper()}" + (f" {trial.failed}" if trial.failed else "")
                + (f" (run raised {err})" if err else "") + f" ({trial.wall_s:.0f}s)")
            if trial.verdict == "fail" and trial.failed:
                res.found = trial
                break
        if res.found is not None:
            break
    res.find_s = time.monotonic() - t0
    if res.found is None:
        res.wall_s = time.monotonic() - t0
        (out / "hunt.json").write_text(json.dumps(res.to_json(), indent=2))
        return res
    want, decided = set(res.found.failed), set(res.found.unknown)
    n = [0]

    def still_fails(faults: list[Fault], cluster: ClusterSpec) -> bool:
        """The same broken guarantee, on a schedule the space admits for this cluster, and no
        check that decided before now unknown (a regression test must stay decisive)."""
        n[0] += 1
        try:
            sc = hunt_scenario(base, faults, cluster, duration_s)
        except ValueError:
            return False                       # not a valid scenario (e.g. a check the cluster cannot have)
        if not replace(space, shards=cluster.shards, copies=cluster.copies, workers=cluster.workers).admits(faults):
            return False
        rep, err = safe_run(run, sc, res.found.seed, out / "shrink" / f"run-{n[0]}")
        return (err is None and rep.get("verdict") == "fail" and bool(want & set(failed_checks(rep)))
                and set(unknown_checks(rep)) <= decided)
    t1 = time.monotonic()
    res.shrunk = shrink(res.found.faults, base.cluster, still_fails, shrink_budget,
                        window_start=1.0, say=say)
    res.shrink_s = time.monotonic() - t1
    name = f"hunt-{base.name}-{res.found.seed}"
    final = hunt_scenario(base, res.shrunk.faults, res.shrunk.cluster, duration_s, name=name,
                          description=f"A failure `pschaos hunt` found in {base.name} (seed {seed}, trial "
                                      f"{res.found.index}) and shrank from {len(res.found.faults)} fault(s) to "
                                      f"{len(res.shrunk.faults)}: it failed {', '.join(sorted(want))}.")
    res.scenario_file = out / f"{name}.yaml"
    res.replay = f"pschaos run {res.scenario_file} --backend {backend} --seed {res.found.seed}"
    res.scenario_file.write_text(to_yaml(final, res.found.seed,
                                         f"pschaos hunt {base.name} --budget {budget} --seed {seed} --backend {backend}",
                                         res.replay))
    say(f"shrunk to {len(res.shrunk.faults)} fault(s) in {res.shrunk.runs} run(s): {res.scenario_file}")
    from pschaos.harness.run.scenario import load_scenario

    written = load_scenario(res.scenario_file)          # what a user commits is what is replayed
    rep, err = safe_run(run, written, res.found.seed, out / "replay")
    res.replayed = {"backend": backend, "verdict": rep.get("verdict"), "failed": failed_checks(rep),
                    "same_failure": bool(want & set(failed_checks(rep))), **({"error": err} if err else {})}
    say(f"replayed {res.scenario_file.name} on {backend}: {str(rep.get('verdict')).upper()} {failed_checks(rep)}")
    if confirm is not None:
        say(f"confirming on --backend {confirm_backend} ...")
        rep, err = safe_run(confirm, written, res.found.seed, out / "confirm")
        res.confirmed = {"backend": confirm_backend, "verdict": rep.get("verdict"), "failed": failed_checks(rep),
                         "same_failure": bool(want & set(failed_checks(rep))), **({"error": err} if err else {})}
        say(f"on {confirm_backend}: {str(rep.get('verdict')).upper()} {failed_checks(rep)}")
    res.wall_s = time.monotonic() - t0
    (out / "hunt.json").write_text(json.dumps(res.to_json(), indent=2))
    return res


__all__ = ["HuntResult", "SAFETY", "hunt", "hunt_scenario", "run_in_process", "to_yaml"]
