"""`pschaos selftest`'s verdicts, score and report, as pure functions of the runs' outcomes.

Fail closed, as every verdict in pschaos: a mutant is *killed* only by a run whose report says
`fail`; a run that ended `unknown` (no report.json, a timeout, a fault that did not fire, a
checker without evidence) is no kill, and a mutant that no run failed but some run left
unknown is reported `unknown`, not `survived` and not `killed`. The score counts killed mutants
over all of them, so an unknown lowers it. The baseline (the unmodified code on the same suite)
must pass every run, or the score means nothing and selftest says so instead of a number.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

SCHEMA = "pschaos.selftest/1"
EVIDENCE_CHECK = "scenario-ran"     # pschaos.harness.run.judge: every fault fired, injected and healed


@dataclass
class RunOutcome:
    """One `pschaos run` of the suite, on the baseline (mutant None) or a mutant copy."""

    mutant: str | None
    scenario: str
    seed: int
    dir: Path
    verdict: str = "unknown"              # pass | fail | unknown, from report.json only
    failed_checks: list[str] = field(default_factory=list)
    unknown_checks: list[str] = field(default_factory=list)
    reason: str | None = None
    wall_s: float = 0.0
    rerun: str | None = None

    def brief(self) -> dict:
        d = asdict(self)
        d["dir"] = str(self.dir)
        return d


def outcome_from_report(o: RunOutcome, report: dict | None, reason: str | None = None) -> RunOutcome:
    """Fill the verdict and the checks from a run's report.json (None: there was none: unknown)."""
    if report is None:
        o.verdict, o.reason = "unknown", reason or "no report.json"
        return o
    v = report.get("verdict")
    o.verdict = v if v in ("pass", "fail", "unknown") else "unknown"
    checks = report.get("checks") or {}
    o.failed_checks = sorted(n for n, c in checks.items() if c.get("valid") is False)
    o.unknown_checks = sorted(n for n, c in checks.items() if c.get("valid") not in (True, False))
    o.rerun = report.get("rerun")
    ran = checks.get(EVIDENCE_CHECK, {}).get("valid")
    if o.verdict == "fail" and ran is not True and not set(o.failed_checks) - {"metric-bounds"}:
        # a checker's False is evidence from the history itself, but a metric bound alone (such as
        # failovers >= 1) fails whenever a fault did not fire as written: no evidence, no kill
        o.verdict = "unknown"
        o.reason = (f"only metric-bounds failed and {EVIDENCE_CHECK} is {ran!r}: the scenario did not run as "
                    "written, so its failure is no kill")
        return o
    if o.verdict == "fail" and not o.failed_checks:
        o.reason = "report says fail but names no failed check"
    elif o.verdict != "pass":
        o.reason = reason or ("checks not decided: " + ", ".join(o.unknown_checks) if o.unknown_checks
                              else f"verdict {v!r}")
    return o


def mutant_status(runs: list[RunOutcome]) -> str:
    """killed (a run failed), survived (every run passed), unknown (no run failed, one was unknown,
    or nothing ran)."""
    if any(r.verdict == "fail" for r in runs):
        return "killed"
    if runs and all(r.verdict == "pass" for r in runs):
        return "survived"
    return "unknown"


def baseline_verdict(runs: list[RunOutcome], planned: int) -> str:
    """pass only when every planned run passed; fail when one failed; else unknown."""
    if any(r.verdict == "fail" for r in runs):
        return "fail"
    if len(runs) == planned and all(r.verdict == "pass" for r in runs):
        return "pass"
    return "unknown"


@dataclass
class MutantResult:
    name: str
    description: str
    models: str
    checker: str
    sim: str
    runs: list[RunOutcome] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def status(self) -> str:
        return mutant_status(self.runs)

    @property
    def killer(self) -> RunOutcome | None:
        """The first run (in the order they ended) that failed."""
        return next((r for r in self.runs if r.verdict == "fail"), None)

    def to_json(self) -> dict:
        k = self.killer
        return {"name": self.name, "status": self.status, "description": self.description, "models": self.models,
                "expected_checker": self.checker, "sim": self.sim,
                "killed_by": None if k is None else {"scenario": k.scenario, "seed": k.seed,
                                                     "failed_checks": k.failed_checks, "rerun": k.rerun,
                                                     "dir": str(k.dir)},
                "expected_checker_failed": None if k is None else self.checker in k.failed_checks,
                "runs": [r.brief() for r in self.runs], "wall_s": round(self.wall_s, 1)}


def score(results: list[MutantResult]) -> float | None:
    """Killed over all mutants (None when there are none)."""
    return round(sum(r.status == "killed" for r in results) / len(results), 4) if results else None


def report(backend: str, suite: list[str], seeds: list[int], baseline: list[RunOutcome], planned: int,
           results: list[MutantResult], wall_s: float) -> dict:
    """The selftest's JSON report (schema pschaos.selftest/1)."""
    b = baseline_verdict(baseline, planned)
    counts = {s: sum(r.status == s for r in results) for s in ("killed", "survived", "unknown")}
    return {"schema": SCHEMA, "backend": backend, "suite": suite, "seeds": seeds,
            "baseline": {"verdict": b, "runs": [r.brief() for r in baseline], "planned": planned},
            "mutants": [r.to_json() for r in results], "counts": counts,
            "score": score(results) if b == "pass" else None, "total": len(results), "wall_s": round(wall_s, 1)}


def exit_code(rep: dict, min_score: float) -> int:
    """0 baseline passed and score >= min_score; 1 the baseline failed or the score is below;
    3 the baseline could not be decided."""
    b = rep["baseline"]["verdict"]
    if b == "fail":
        return 1
    if b != "pass":
        return 3
    return 0 if rep["score"] is not None and rep["score"] >= min_score else 1


def text(rep: dict) -> str:
    """The human summary: baseline first, then one line per mutant, then the score."""
    b = rep["baseline"]
    lines = [f"pschaos selftest --backend {rep['backend']}: suite of {len(rep['suite'])} scenario(s) x "
             f"seed(s) {','.join(map(str, rep['seeds']))}"]
    n_pass = sum(r["verdict"] == "pass" for r in b["runs"])
    lines.append(f"  baseline (unmodified code): {b['verdict'].upper()} ({n_pass}/{b['planned']} runs passed)")
    for r in b["runs"]:
        if r["verdict"] != "pass":
            lines.append(f"    {r['verdict']} {r['scenario']} seed={r['seed']}: {r['reason']}"
                         + (f"; rerun: {r['rerun']}" if r.get("rerun") else ""))
    if b["verdict"] != "pass":
        lines.append("  the baseline did not pass: no mutant was run, there is no score")
        return "\n".join(lines)
    width = max((len(m["name"]) for m in rep["mutants"]), default=10)
    for m in rep["mutants"]:
        k = m["killed_by"]
        if k:
            how = (f"by {k['scenario']} seed={k['seed']} ({', '.join(k['failed_checks'])}"
                   + ("" if m["expected_checker_failed"] else f"; expected {m['expected_checker']}") + ")")
        else:
            unk = [r for r in m["runs"] if r["verdict"] != "pass"]
            how = f"after {len(m['runs'])} run(s)" + (
                f"; unknown: {', '.join(r['scenario'] + ' seed=' + str(r['seed']) for r in unk[:3])}" if unk else "")
        lines.append(f"  {m['name']:<{width}}  {m['status'].upper():<8} {how}  {m['wall_s']:.0f} s")
    c = rep["counts"]
    lines.append(f"  mutation score: {rep['score']} ({c['killed']} killed, {c['survived']} survived, "
                 f"{c['unknown']} unknown, of {rep['total']}) in {rep['wall_s']:.0f} s")
    return "\n".join(lines)


def write(rep: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    p = out / "selftest.json"
    p.write_text(json.dumps(rep, indent=2, default=str))
    return p
