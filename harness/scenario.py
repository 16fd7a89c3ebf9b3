"""Scenario files: the cluster, the workload, the fault schedule and the expectations.

A scenario is data (YAML, or the same model built in Python); no code runs from YAML. It is
validated by pydantic, and every error is reported with the file, the line and the field path,
so `faults[1].target` on line 14 is what a user reads, never a traceback.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import ScenarioError

FAULT_KINDS = ("kill", "stop", "restart", "pause")
CHECKS = ("no-lost-acks", "single-primary", "exactly-once", "replicas-match", "converged", "catch-up-by-delta",
          "failover-budget")
TARGET_RE = re.compile(r"^(shard-\d+/\d+|worker-\d+|etcd|(primary|replica)\(shard=(\d+|any)\)|worker\((\d+|any)\))$")
METRIC_RE = re.compile(r"^\s*([a-z_][a-z0-9_.]*)\s*(<=|>=|==|<|>)\s*(-?[0-9.]+)\s*$")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClusterSpec(Strict):
    shards: int = Field(2, ge=1, le=64)
    copies: int = Field(3, ge=1, le=9)
    workers: int = Field(2, ge=0, le=64)
    replication: Literal["sync", "async"] = "sync"
    training: Literal["async", "bsp", "ssp"] = "async"
    staleness: int = Field(2, ge=0)
    model: Literal["mlp", "widedeep"] = "mlp"
    device: str = "auto"
    optimizer: Literal["sgd", "adagrad", "adam"] = "adam"
    lr: float = Field(0.01, gt=0)
    checkpoint_interval_s: float = Field(2.0, gt=0)
    max_lag: int = Field(256, ge=1)


class Workload(Strict):
    steps: int = Field(300, ge=1, le=1_000_000)
    duration_s: float | None = Field(None, gt=0, le=3600)
    step_delay_s: float = Field(0.0, ge=0, le=10)


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
    kind: Literal["kill", "stop", "restart", "pause"]
    target: str
    duration_s: float | None = Field(None, gt=0, le=3600)
    until: At | None = None

    @field_validator("target")
    @classmethod
    def known_target(cls, v: str) -> str:
        if not TARGET_RE.match(v.replace(" ", "")):
            raise ValueError(f"{v!r} is not a target; use a name (shard-0/1, worker-2, etcd) or a selector "
                             "(primary(shard=0), replica(shard=any), worker(any))")
        return v.replace(" ", "")


class Expect(Strict):
    checks: list[str] = Field(default_factory=lambda: ["no-lost-acks", "single-primary", "exactly-once",
                                                       "replicas-match", "converged"])
    metrics: list[str] = Field(default_factory=list)
    catchup_ratio: float = Field(1.1, gt=0)          # sync_bytes <= ratio * changed_bytes
    catchup_vs_snapshot: float = Field(0.5, gt=0)   # sync_bytes <= this * snapshot_bytes
    failover_budget_ms: float = Field(800, gt=0)

    @field_validator("checks")
    @classmethod
    def known_checks(cls, v: list[str]) -> list[str]:
        for c in v:
            if c not in CHECKS:
                raise ValueError(f"unknown check {c!r}; known: {', '.join(CHECKS)}")
        return v

    @field_validator("metrics")
    @classmethod
    def bounds(cls, v: list[str]) -> list[str]:
        for m in v:
            if not METRIC_RE.match(m):
                raise ValueError(f"{m!r} is not a bound; write it as 'metric <= number' (e.g. failover_ms.p99 <= 800)")
        return v


class Scenario(Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    description: str = ""
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    workload: Workload = Field(default_factory=Workload)
    faults: list[Fault] = Field(default_factory=list)
    expect: Expect = Field(default_factory=Expect)
    path: str | None = Field(None, exclude=True)


def _line_of(node: yaml.Node | None, loc: tuple) -> int | None:
    """Walk a composed YAML node along a pydantic error location; the deepest line found (1-based)."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            nxt = node.value[part]
        else:
            nxt = None
        if nxt is None:
            break
        node = nxt
        line = node.start_mark.line + 1
    return line


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
            line = _line_of(root, loc)
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{path}:{line}: {field or '(top)'}: {msg}")
        raise ScenarioError("\n".join(lines)) from None
    sc.path = str(path)
    return sc
