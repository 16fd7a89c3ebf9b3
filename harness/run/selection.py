"""The checks a run judges: every one that applies, the scenario's additions, never a silent omission.

`expect.checks` adds checks to the defaults; `expect.exclude` removes one only with a reason.
The defaults are every check the run gives evidence for: psnodes' from its rules
(harness/checkers/applicable.py), an adapted system's or a training job's from its class
(`default_checks`). The report lists what was excluded and why, and what did not apply and why,
so a reader sees every check of the system's and what became of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pschaos.harness.backends.systems import system_class
from pschaos.harness.checkers.applicable import psnodes as psnodes_rules
from pschaos.harness.faults.targets import default_target


@dataclass(frozen=True)
class Selection:
    checks: list[str]                                       # what the judge runs, defaults first
    excluded: dict[str, str] = field(default_factory=dict)  # by the scenario, with its reason
    not_applicable: dict[str, str] = field(default_factory=dict)   # no evidence here, or on request

    def to_json(self) -> dict[str, Any]:
        return {"checks": list(self.checks), "excluded": dict(self.excluded), "not_applicable": dict(self.not_applicable)}


def applicability(sc, drawn: list | str | None = None) -> dict[str, str | None]:
    """Each check of the scenario's system: None when it applies by default, else why not.
    `drawn`: a run's nemesis faults (drawn from its seed before it starts), None for the scenario
    as written whatever its seed, or "any" for what some seed's draws may bring (what a scenario
    may exclude, or expect to find)."""
    if sc.system == "psnodes":
        return psnodes_rules(sc.cluster.model_dump(), [f.model_dump() for f in sc.faults],
                             sc.nemesis.model_dump() if sc.nemesis else None, sc.expect.stop_acking_grace_s,
                             default_target, drawn if drawn == "any" else [f.model_dump() for f in drawn or []])
    a = system_class(sc.system)
    return {c: None if c in a.default_checks else
            f"not among {sc.system}'s default checks: add it to expect.checks to judge it" for c in a.checks}


def select(sc, drawn: list | str | None = None) -> Selection:
    """The defaults, then the scenario's additions, less its exclusions (checked by the loader).
    A run passes its nemesis' draws (`drawn`): what they surely bring is judged at that seed."""
    rules = applicability(sc, drawn)
    defaults = [c for c, why in rules.items() if why is None]
    checks = [c for c in [*defaults, *[c for c in sc.expect.checks if c not in defaults]]
              if c not in sc.expect.exclude]
    return Selection(checks, dict(sc.expect.exclude),
                     {c: why for c, why in rules.items() if why is not None and c not in checks})


def exclusion_problem(sc) -> str | None:
    """Why the scenario's exclusions cannot stand, or None: a reason must be given, and a check
    excluded must be one that would have run (at some seed, where a nemesis draws the faults)."""
    rules = applicability(sc, "any")
    for check, why in sc.expect.exclude.items():
        if check in sc.expect.checks:
            return f"expect.exclude.{check}: also in expect.checks; a check is added or excluded, not both"
        if check not in rules:
            return (f"expect.exclude.{check}: not a check of {sc.system}; its checks are "
                    f"{', '.join(rules)}")
        if rules[check] is not None:
            return f"expect.exclude.{check}: it does not run here anyway ({rules[check]}); remove the exclusion"
    return None


def only(sc, keep: list[str], why: str) -> dict[str, Any]:
    """An `expect` for a run made for another purpose (a fault-free baseline, a hunt's trial):
    just `keep`, every other default of `sc` (as it will run: its own faults) excluded with
    `why`, no expected findings, no bounds."""
    defaults = [c for c, w in applicability(sc, "any").items() if w is None]   # a nemesis' draws too
    return {"checks": [c for c in keep if c not in defaults],
            "exclude": {c: why for c in defaults if c not in keep},
            "finds": [], "may_find": [], "metrics": []}
