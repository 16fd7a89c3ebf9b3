"""Scenario files: the cluster, the workload, the fault schedule and the expectations.

A scenario is data (YAML, or the same model built in Python); no code runs from YAML. It is
validated by pydantic, and every error is reported with the file, the line and the field path,
so `faults[1].target` on line 14 is what a user reads, never a traceback.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from pschaos.reports.bounds import parse
from pschaos.reports.yamlpos import line_of

from pschaos.harness.backends.systems import SYSTEMS, is_job, system_class as adapter_class
from pschaos.harness.backends.cluster import ClusterSpec, Strict
from pschaos.harness.errors import HarnessError, ScenarioError

from pschaos.harness.faults import ALL_KINDS, LINK_KINDS, params_error
from pschaos.harness.faults.moments import moment_target_error
from pschaos.harness.faults.registry import NO_TARGET
from pschaos.harness.faults.targets import is_link_target, valid_target
from pschaos.harness.run.selection import Selection, exclusion_problem, only, select
from pschaos.harness.run.systems_fit import (ADAPTED_CLUSTER_FIELDS, ADAPTED_KINDS, adapted_target_error,
                                              job_problem)

CHECKS = ("no-lost-acks", "single-primary", "exactly-once", "replicas-match", "converged", "catch-up-by-delta",
          "failover-budget", "delta-complete", "pulled-copy-matches", "monotone-reads", "staleness",
          "barrier-live", "checkpoints-atomic", "checkpoints-monotone", "stops-acking", "converge-baseline", "losses-accounted",
          "no-lost-updates", "counters-match", "linearizable-reads", "single-owner",
          "no-spurious-failovers", "acks-durable", "reads-committed", "lag-bounded", "best-promoted", "checkpoint-loads", "handoff-continuity", "ownership-exact", "migration-transparent", "resume-exact", "lost-work-bounded", "no-silent-hang", "restarts-bounded")
class Workload(Strict):
    steps: int = Field(300, ge=1, le=1_000_000)
    duration_s: float | None = Field(None, gt=0, le=3600)
    step_delay_s: float = Field(0.0, ge=0, le=10)
    read_every: int = Field(10, ge=0)     # adapted systems: a read after every N updates (0: none)
    # no acknowledged step for this long after the last heal is a stall: the run ends with a
    # failing `progress` check instead of waiting for a test's timeout (harness/run/stall.py)
    stall_s: float = Field(90.0, gt=0, le=3600)


class At(Strict):
    time: float | None = Field(None, ge=0)
    step: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def one_of(self) -> "At":
        if (self.time is None) == (self.step is None):
            raise ValueError("give exactly one of time (seconds) or step (training step of worker-0)")
        return self


class Fault(Strict):
    at: At
    kind: str
    target: str = "workers"
    params: dict[str, Any] = Field(default_factory=dict)
    duration_s: float | None = Field(None, gt=0, le=3600)
    until: At | None = None

    @field_validator("kind")
    @classmethod
    def known_kind(cls, v: str) -> str:
        if v not in ALL_KINDS:
            raise ValueError(f"unknown fault kind {v!r}; known: {', '.join(ALL_KINDS)}")
        return v

    @field_validator("target")
    @classmethod
    def known_target(cls, v: str) -> str:
        if not valid_target(v):
            raise ValueError(f"{v!r} is not a target; use a name (shard-0/1, worker-2, etcd), a selector "
                             "(primary(shard=0), replica(shard=any), replicas(shard=0), shard(1), worker(any), "
                             "nodes, workers) or a link 'A -> B' / 'A <-> B'")
        return v.replace(" ", "")

    @model_validator(mode="after")
    def fits_kind(self) -> "Fault":
        link = is_link_target(self.target)
        if self.kind in LINK_KINDS and not link:
            raise ValueError(f"target: a {self.kind} fault acts on links; write the target as 'A -> B' "
                             "(e.g. 'workers -> primary(shard=0)') or 'A <-> B'")
        if self.kind not in LINK_KINDS and link:
            raise ValueError(f"target: a {self.kind} fault acts on a process, not on links")
        if self.kind not in LINK_KINDS + NO_TARGET and self.target == "workers":
            raise ValueError(f"target: a {self.kind} fault needs one process (e.g. primary(shard=0))")
        err = params_error(self.kind, self.params)
        if err:
            raise ValueError(f"params: {err}")
        err = moment_target_error(self.kind, self.params, self.target)
        if err:
            raise ValueError(f"target: {err}")
        return self


class Nemesis(Strict):
    """Random faults drawn from the run's seed: which kinds, how often, on what, for how long."""

    kinds: list[str] = Field(min_length=1)
    interval_s: float = Field(3.0, gt=0)             # mean gap between faults (exponential)
    duration_s: float = Field(1.5, gt=0)             # each fault heals after this
    start_s: float = Field(2.0, ge=0)
    stop_s: float = Field(60.0, gt=0)                # no new fault after this
    overlap: bool = False                            # a fault may start before the last one healed
    targets: dict[str, str | list[str]] = Field(default_factory=dict)   # a list: one drawn per fault
    params: dict[str, dict[str, Any] | list[dict[str, Any]]] = Field(default_factory=dict)  # a list: one drawn per fault

    @model_validator(mode="after")
    def params_fit(self) -> "Nemesis":
        for kind, ps in self.params.items():
            if kind not in ALL_KINDS:
                raise ValueError(f"params.{kind}: not a fault kind; known: {', '.join(ALL_KINDS)}")
            if isinstance(ps, list) and not ps:
                raise ValueError(f"params.{kind}: an empty list; give at least one set of params")
            if kind not in self.kinds:
                raise ValueError(f"params.{kind}: {kind} is not in kinds {self.kinds}, so these params would never "
                                 f"be used; add {kind} to kinds or remove its params")
            for i, p in enumerate([ps] if isinstance(ps, dict) else ps):
                where = f"params.{kind}" + ("" if isinstance(ps, dict) else f"[{i}]")
                err = params_error(kind, p)
                if err:
                    raise ValueError(f"{where}: {err}")
                ts = self.targets.get(kind, "replica(shard=any)")
                for t in [ts] if isinstance(ts, str) else ts:
                    err = moment_target_error(kind, p, t.replace(" ", ""))
                    if err:
                        raise ValueError(f"{where}: with targets.{kind} {t!r}: {err}")
        return self

    @model_validator(mode="after")
    def targets_fit(self) -> "Nemesis":
        for kind, ts in self.targets.items():
            for t in ([ts] if isinstance(ts, str) else ts):
                if not valid_target(t):
                    raise ValueError(f"targets.{kind}: {t!r} is not a target (a node, a selector, 'A -> B', or a "
                                     "partition shape: halves(shard=N), bridge(shard=N), majorities-ring(shard=N))")
                if (kind in LINK_KINDS) != is_link_target(t):
                    raise ValueError(f"targets.{kind}: {t!r} does not fit a {kind} fault (a link fault needs "
                                     "'A -> B' or a shape, a process fault a node)")
            if isinstance(ts, list) and not ts:
                raise ValueError(f"targets.{kind}: an empty list; give at least one target")
        return self

    @field_validator("kinds")
    @classmethod
    def known(cls, v: list[str]) -> list[str]:
        bad = [k for k in v if k not in ALL_KINDS or k in NO_TARGET + ("flap",)]
        if bad:
            raise ValueError(f"kinds {bad} cannot be drawn at random; use kinds from "
                             f"{', '.join(k for k in ALL_KINDS if k not in NO_TARGET + ('flap',))}")
        return v


class Expect(Strict):
    # checks to run beyond the defaults: every check the run gives evidence for runs anyway
    # (harness/run/selection.py); name here the ones that need a setting of your own
    checks: list[str] = Field(default_factory=list)
    # a default check not to run, with the reason the report prints: {check: reason}
    exclude: dict[str, str] = Field(default_factory=dict)
    metrics: list[str] = Field(default_factory=list)
    # checks this scenario exists to see fail (a system known to lose acknowledged updates): as a
    # test it passes when each of them fails and none is unknown; its verdict stays fail. An entry
    # may name the failure kinds it accepts ({linearizable-reads: [stale]}); a bare name accepts the
    # kinds a system causes (harness/checkers/updates.py SYSTEM_BUG_KINDS)
    finds: list[str | dict[str, list[str]]] = Field(default_factory=list)
    # checks whose outcome the system's design leaves open (Redis' asynchronous replication may
    # lose an acknowledged update to a SIGKILL): as a test they must be decided, pass or a failure
    # of a kind the system causes, never unknown; the verdict says which it was
    may_find: list[str] = Field(default_factory=list)

    def finds_kinds(self) -> dict[str, tuple[str, ...] | None]:
        """Each check this scenario finds, with the failure kinds it accepts (None: the defaults)."""
        out: dict[str, tuple[str, ...] | None] = {}
        for f in self.finds:
            if isinstance(f, str):
                out[f] = None
            else:
                out.update({k: tuple(v) for k, v in f.items()})
        return out
    catchup_ratio: float = Field(1.1, gt=0)          # sync_bytes <= ratio * changed_bytes
    catchup_vs_snapshot: float = Field(0.5, gt=0)   # sync_bytes <= this * snapshot_bytes, judged only where set
    failover_budget_ms: float = Field(800, gt=0)
    baseline_margin: float = Field(0.05, ge=0)       # converge-baseline: final <= baseline + margin
    stop_acking_grace_s: float = Field(1.0, ge=0)    # stops-acking: acks allowed this long after the cut

    @field_validator("checks")
    @classmethod
    def known_checks(cls, v: list[str]) -> list[str]:
        for c in v:
            if c not in CHECKS:
                raise ValueError(f"unknown check {c!r}; known: {', '.join(CHECKS)}")
        return v

    @field_validator("exclude")
    @classmethod
    def reasons(cls, v: dict[str, str]) -> dict[str, str]:
        for c, why in v.items():
            if c not in CHECKS:
                raise ValueError(f"unknown check {c!r}; known: {', '.join(CHECKS)}")
            if not isinstance(why, str) or len(why.strip()) < 8:
                raise ValueError(f"{c}: give the reason it must not run here (a sentence the report prints), "
                                 f"not {why!r}")
        return v

    @field_validator("metrics")
    @classmethod
    def bounds(cls, v: list[str]) -> list[str]:
        for m in v:
            if parse(m) is None:
                raise ValueError(f"{m!r} is not a bound; write it as 'metric <= number' (e.g. failover_ms.p99 <= 800)")
        return v


class Scenario(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str = ""
    system: str = "psnodes"               # what runs: psnodes, or an adapter (harness/backends/adapters/)
    # the adapter's own settings (its `options`); defaults filled in, so validated even when absent
    system_options: dict[str, Any] = Field(default_factory=dict, validate_default=True)
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    workload: Workload = Field(default_factory=Workload)
    faults: list[Fault] = Field(default_factory=list)
    nemesis: Nemesis | None = None
    expect: Expect = Field(default_factory=Expect)
    path: str | None = Field(None, exclude=True)

    def selection(self, drawn: list | None = None) -> Selection:
        """The checks this scenario's runs judge, and what became of the others (selection.py);
        a run passes its nemesis' draws at its seed (`drawn`)."""
        return select(self, drawn)

    def expect_only(self, keep: list[str], why: str) -> "Expect":
        """This scenario's expect for a run made for another purpose (a fault-free baseline, a
        hunt's trial): only `keep`, every other default excluded with `why`."""
        return self.expect.model_copy(update=only(self, keep, why))

    def uses_links(self) -> bool:
        kinds = [f.kind for f in self.faults] + (self.nemesis.kinds if self.nemesis else [])
        return any(k in LINK_KINDS for k in kinds)

    def proxied(self) -> bool:
        return self.cluster.network == "proxied" or (self.cluster.network == "auto" and self.uses_links())

    @field_validator("system")
    @classmethod
    def known_system(cls, v: str) -> str:
        if v not in SYSTEMS:
            try:
                adapter_class(v)             # an adapter of one's own, by its import path
            except HarnessError as e:
                raise ValueError(str(e).removeprefix("system: ") + " (docs/adapters.md)") from None
        return v

    @field_validator("system_options")
    @classmethod
    def options_fit(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """The adapter's own settings, types and defaults (its `options`), named on error."""
        system = info.data.get("system", "psnodes")
        if system == "psnodes":
            return v
        return adapter_class(system).check_options(v)

    @model_validator(mode="after")
    def fits_system(self) -> "Scenario":
        """An adapted system: one group, its options, its checks, the faults it can take."""
        if self.system == "psnodes":
            if self.system_options:
                raise ValueError("system_options: psnodes takes its settings under cluster; remove system_options")
            adapter_only = [c for c in self.expect.checks if c in ("no-lost-updates", "counters-match",
                                                                  "linearizable-reads")]
            if adapter_only:
                raise ValueError(f"expect.checks: {adapter_only} judge an adapted system's updates; psnodes is "
                                 "judged by no-lost-acks, exactly-once and the rest")
            if "read_every" in self.workload.model_fields_set:
                raise ValueError("workload.read_every: psnodes' workers train and read nothing back this way; "
                                 "remove read_every (it sets an adapted system's reads)")
            from pschaos.harness.faults.shards import schedule_problem, shard_counts
            problem = schedule_problem(self.cluster.replication, self.faults,
                                       self.nemesis.kinds if self.nemesis else ())
            if problem:
                raise ValueError(problem)
            counts = shard_counts(self.cluster.shards, self.faults)
            if isinstance(counts, str):
                raise ValueError(counts)
            self.cluster.max_shards = max(self.cluster.max_shards, *counts)
            return self
        a = adapter_class(self.system)
        if is_job(self.system):
            problem = job_problem(self, a)
            if problem:
                raise ValueError(problem)
            return self
        if self.cluster.shards != 1:
            raise ValueError(f"cluster.shards: {self.system} runs one group; set shards: 1")
        wrong = [c for c in self.expect.checks if c not in a.checks]
        if wrong:
            raise ValueError(f"expect.checks: {wrong} do not apply to {self.system}; it is judged by "
                             f"{', '.join(a.checks)}")
        ignored = sorted(self.cluster.model_fields_set - ADAPTED_CLUSTER_FIELDS)
        if ignored:
            raise ValueError(f"cluster: {ignored} are psnodes' settings and {self.system} would ignore them; remove "
                             f"them (an adapted system takes {', '.join(sorted(ADAPTED_CLUSTER_FIELDS))} there, and "
                             "its own settings under system_options)")
        kinds = [f.kind for f in self.faults] + (self.nemesis.kinds if self.nemesis else [])
        bad = sorted({k for k in kinds if k not in ADAPTED_KINDS})
        if bad:
            raise ValueError(f"faults: {self.system} takes the fault kinds {', '.join(ADAPTED_KINDS)}, not {bad}")
        targets = [(f"faults[{i}]", f.target, f.params) for i, f in enumerate(self.faults)]
        if self.nemesis:
            targets += [(f"nemesis.targets.{k}", t, {}) for k, ts in self.nemesis.targets.items()
                        for t in ([ts] if isinstance(ts, str) else ts)]
            targets += [(f"nemesis.params.{k}", "primary(shard=0)", p) for k, ps in self.nemesis.params.items()
                        for p in ([ps] if isinstance(ps, dict) else ps)]
        for where, target, params in targets:
            err = adapted_target_error(target, params, self.cluster.copies)
            if err:
                raise ValueError(f"{where}: {err}")
        err = a.scenario_error(self.cluster.copies, self.system_options)
        if err:
            raise ValueError(err)
        return self

    @model_validator(mode="after")
    def finds_checked(self) -> "Scenario":
        from pschaos.harness.checkers.updates import FAILURE_KINDS

        problem = exclusion_problem(self)
        if problem:
            raise ValueError(problem)
        finds = self.expect.finds_kinds()
        selected = select(self, "any").checks       # a nemesis: what some seed's draws bring
        missing = [c for c in [*finds, *self.expect.may_find] if c not in selected]
        both = sorted(set(finds) & set(self.expect.may_find))
        if both:
            raise ValueError(f"expect.may_find: {both} are in expect.finds too; a check the scenario finds must "
                             "fail, one it may find may pass: name it in one of them")
        if missing:
            raise ValueError(f"expect.finds/may_find: {missing} do not run here (excluded, or not applicable: "
                             "add them to expect.checks); a scenario can only expect to see fail a check it runs")
        for check, kinds in finds.items():
            if kinds is not None:
                known = FAILURE_KINDS.get(check, ())
                bad = [k for k in kinds if k not in known] or ([] if kinds else ["(none)"])
                if bad:
                    raise ValueError(f"expect.finds.{check}: {bad} are not failure kinds of {check}; "
                                     f"name some of {', '.join(known) or 'none: give the check by name alone'}")
        return self

    @model_validator(mode="after")
    def consistent(self) -> "Scenario":
        if self.cluster.network == "direct" and self.uses_links():
            raise ValueError("cluster.network: direct cannot carry link faults; use auto or proxied")
        for check in ("staleness", "barrier-live"):
            if check in self.expect.checks and self.cluster.training == "async":
                raise ValueError(f"expect.checks: {check} needs cluster.training: bsp or ssp "
                                 "(async training has no barrier to check)")
        ev = self.cluster.eval_every
        if ev > self.workload.steps and self.workload.duration_s is None:
            raise ValueError(f"cluster.eval_every: {ev} is more than workload.steps={self.workload.steps}, "
                             f"so no evaluation pass would run; use at most {self.workload.steps}, or 0 for none")
        return self


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; raises ScenarioError naming file, line and field."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read scenario: {e.strerror}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ScenarioError(f"{path}{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}:1: a scenario is a mapping with name, cluster, workload, faults, expect")
    try:
        sc = Scenario.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            field = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")
            line = line_of(root, loc)
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{path}:{line}: {field or '(top)'}: {msg}")
        raise ScenarioError("\n".join(lines)) from None
    sc.path = str(path)
    return sc
