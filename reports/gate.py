"""Release gates: required checks and metric bounds over many runs, as an exit code.

A gate file (YAML) names what must hold for every scenario (`all`) and per scenario:

    all:
      checks: [no-lost-acks, single-primary]
      metrics: ["lost_acked_updates == 0"]
    scenarios:
      kill-primary:
        metrics: ["failover_ms.p99 <= 800", "pass_rate >= 0.95"]

Metric bounds hold on every run of the scenario; `pass_rate` is the share of its runs that
passed. Exit 0 when all hold, 1 with one line per violated bound (scenario, metric, bound, value,
run), 2 when the gate file is malformed (file, line, field) or evidence is missing (a report.json
that cannot be read, a run folder without one: `gather`), 3 when nothing was violated but a run
was `unknown`. The gate fails closed: it never passes over evidence it could not read.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from pschaos.reports.bounds import holds, parse, value_at
from pschaos.reports.yamlpos import line_of


class GateFileError(Exception):
    """The gate file is malformed; the message names the file, the line and the field."""


@dataclass
class Rule:
    checks: list[str] = field(default_factory=list)
    metrics: list[tuple[str, str, float, str]] = field(default_factory=list)   # (metric, op, number, text)


@dataclass
class Gate:
    all: Rule
    scenarios: dict[str, Rule]


def load_gate(path: str | Path) -> Gate:
    path = Path(path)
    try:
        text = path.read_text()
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except OSError as e:
        raise GateFileError(f"{path}: cannot read gate file: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise GateFileError(f"{path}:{mark.line + 1 if mark else 1}: not valid YAML: {getattr(e, 'problem', e)}") from None

    def err(where: list, msg: str) -> GateFileError:
        field_ = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in where).replace(".[", "[")
        return GateFileError(f"{path}:{line_of(root, where) or 1}: {field_ or '(top)'}: {msg}")

    if not isinstance(data, dict):
        raise err([], "a gate file is a mapping with `all` and/or `scenarios`")
    unknown = sorted(set(data) - {"all", "scenarios"})
    if unknown:
        raise err([unknown[0]], "unknown key; use `all` and `scenarios`")

    def rule(raw, where: list) -> Rule:
        if raw is None:
            return Rule()
        if not isinstance(raw, dict):
            raise err(where, "must be a mapping with `checks` and/or `metrics`")
        bad = sorted(set(raw) - {"checks", "metrics"})
        if bad:
            raise err(where + [bad[0]], "unknown key; use `checks` and `metrics`")
        checks = raw.get("checks") or []
        if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
            raise err(where + ["checks"], "must be a list of check names")
        metrics = []
        for i, m in enumerate(raw.get("metrics") or []):
            b = parse(m)
            if b is None:
                raise err(where + ["metrics", i], f"{m!r} is not a bound; write `metric <= number`, "
                                                  "e.g. failover_ms.p99 <= 800 or pass_rate >= 0.95")
            metrics.append((*b, str(m).strip()))
        return Rule(checks, metrics)

    scen = data.get("scenarios") or {}
    if not isinstance(scen, dict):
        raise err(["scenarios"], "must map scenario names to rules")
    return Gate(rule(data.get("all"), ["all"]), {k: rule(v, ["scenarios", k]) for k, v in scen.items()})


RUN_MARKS = ("history.jsonl", "junit.xml", "soak-run.log", "run/events", "run/.pschaos-run")   # what a started run leaves


def gather(dirs: list[str | Path]) -> tuple[list[tuple[Path, dict]], list[str]]:
    """Every report.json under the given folders (a folder, or a report.json, may be one run),
    and the problems that leave evidence missing, one line each naming the path: a folder that
    does not exist or holds no run, a report.json that cannot be read or is not a report, a run's
    folder (its history, logs or events) without a report.json. A gate over missing evidence
    never passes (fail closed)."""
    out: list[tuple[Path, dict]] = []
    problems: list[str] = []
    for d in map(Path, dirs):
        if not d.exists():
            problems.append(f"{d}: no such file or folder")
            continue
        paths = [d] if d.is_file() else sorted(d.rglob("report.json"))
        for p in paths:
            try:
                r = json.loads(p.read_text())
            except (OSError, ValueError) as e:
                problems.append(f"{p.parent}: its report.json cannot be read ({e.__class__.__name__}: {e}); "
                                "rerun that run, or remove the folder if it is not one")
                continue
            if not isinstance(r, dict) or "scenario" not in r or "verdict" not in r:
                problems.append(f"{p.parent}: its report.json is not a run's report (no scenario or verdict)")
                continue
            if r.get("made_for"):      # another run's fault-free run (its baseline/ folder): not a run of the suite
                continue
            out.append((p, r))
        if d.is_dir():
            reported = {p.parent for p in paths}
            started = {m.parents[mark.count("/")] for mark in RUN_MARKS for m in d.rglob(mark)}
            for run in sorted(started - reported):
                if not any(r in run.parents for r in reported):
                    problems.append(f"{run}: a run started here and left no report.json (it crashed, was killed "
                                    "or is still running); rerun it, or remove the folder")
            if not paths and not started:
                problems.append(f"{d}: no run's report.json in this folder")
    return out, problems


def evaluate(gate: Gate, reports: list[tuple[Path, dict]]) -> list[str]:
    """One message per violated bound or missing check; empty when the gate holds."""
    by_scenario: dict[str, list[tuple[Path, dict]]] = {}
    for p, r in reports:
        by_scenario.setdefault(r.get("scenario", "?"), []).append((p, r))
    out = []
    for name, runs in sorted(by_scenario.items()):
        rules = [gate.all] + ([gate.scenarios[name]] if name in gate.scenarios else [])
        rate = sum(r.get("verdict") == "pass" for _, r in runs) / len(runs)
        for rule in rules:
            for check in rule.checks:
                for p, r in runs:
                    c = r.get("checks", {}).get(check)
                    if c is None or c.get("valid") is not True:
                        got = "not run" if c is None else c.get("valid")
                        out.append(f"{name}: check {check} is required but was {got} (run {p.parent})")
            for metric, op, num, text in rule.metrics:
                if metric == "pass_rate":
                    if not holds(rate, op, num):
                        out.append(f"{name}: pass_rate = {rate:.3f} violates {text} ({len(runs)} runs)")
                    continue
                for p, r in runs:
                    v = value_at(r.get("metrics", {}), metric)
                    if not holds(v, op, num):
                        out.append(f"{name}: {metric} = {v} violates {text} (run {p.parent})")
    missing = sorted(set(gate.scenarios) - set(by_scenario))
    out += [f"{m}: the gate names this scenario but no run of it was given" for m in missing]
    return out
