"""A training job as a System: supervised processes, judged by what its shim recorded.

Before the run, `prepare` runs the same job without its faults (same seed, same options) for
the uninterrupted model resume-exact compares against, and its loss for the report. After the
run, `observe` records the final model the ranks reported and one `train-done` per rank.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pschaos.harness.backends.base import Backend
from pschaos.harness.backends.jobs.api import TrainingJob
from pschaos.harness.errors import HarnessError
from pschaos.harness.history.events import read_events

Record = Callable[..., dict]
Say = Callable[[str], None]


class JobSystem:
    def __init__(self, job: type[TrainingJob]) -> None:
        self.job, self.name = job, job.name

    def backend_factory(self, backend: str) -> Callable[..., Backend]:
        if backend != "process":
            raise HarnessError(f"--backend {backend}: the training job {self.name} runs as local processes only; "
                               "use --backend process")
        from pschaos.harness.backends.jobs.backend import JobBackend

        return lambda sc, run_dir, run_id, seed: JobBackend(self.job, sc, run_dir, run_id, seed)

    def sample(self, be: Backend, record: Record, tick: int) -> None:
        """Nothing to sample: the ranks record their own steps."""

    def settle(self, be: Backend, clock: Any, record: Record, say: Say) -> None:
        ok = clock.wait_until(be.settled, 30.0, 0.2)
        record("quiesce", {"settled": ok, "timeout_s": 30.0})

    def observe(self, be: Backend, clock: Any, record: Record, say: Say) -> None:
        finals = [e for p in be.event_files() for e in read_events(p) if e.get("f") == "job-final"]
        for e in finals:
            v = e["value"]
            record("train-done", {"worker": v["worker"], "steps": v["steps"], "final_loss": v.get("loss"),
                                  "target_loss": float("inf"), "incarnation": v["incarnation"]}, node=v["worker"])
        if not finals:
            say(f"{self.name}: no rank reported a final model; the checks will say so")

    def prepare(self, sc, out: Path, rerun, say: Say) -> dict:
        """The same job, same seed, without faults: the model every resume must reproduce."""
        if "resume-exact" not in sc.selection().checks:
            return {}
        quiet = sc.model_copy(update={"faults": [], "nemesis": None})
        quiet = quiet.model_copy(update={"expect": quiet.expect_only(
            ["exactly-once"], "a fault-free run made for resume-exact: only its final model is used")})
        say(f"{self.name}: a fault-free run first, for the model every resume must reproduce")
        folder = out / "baseline"
        made = rerun(quiet, folder) or {}
        events = read_events(folder / "history.jsonl")
        finals = [e["value"] for e in events if e.get("f") == "job-final"]
        # any restart: the harness's of a process (job-restart) or the launcher's of its ranks (incarnation x.y)
        restarted = sorted({str((e.get("value") or {}).get("incarnation")) for e in events
                            if e.get("f") == "job-restart" or (e.get("f") in ("job-start", "job-final")
                                                              and str(e["value"].get("incarnation", "0.0")) != "0.0")})
        why = ("reported no final model" if not finals else
               f"restarted (incarnations {', '.join(restarted)}): it is no uninterrupted run" if restarted else
               f"was judged {made.get('verdict')}, not pass" if made.get("verdict") != "pass" else None)
        if why:     # a resume bug would be in both models: nothing to compare with (unknown)
            return {"baseline": None, "baseline_error": f"the fault-free run {why} ({folder})"}
        v = finals[0]
        made_in = made.get("reused_from") or str(folder)    # made earlier in the session, for the same run
        return {"baseline": {"digest": v["digest"], "values": v.get("values"), "loss": v.get("loss"),
                             "steps": v["steps"], "audit": v["audit"], "made_in": made_in}}

    def context(self, sc) -> dict:
        job = self.job(_env_for(sc))
        return {"job": job.plan(), "workers": [], "finds": list(sc.expect.finds)}

    def artifacts(self, history: list[dict], out: Path) -> None:
        """Nothing beyond the history: every step and the final model are in it."""


def _env_for(sc):
    from pschaos.harness.backends.jobs.api import JobEnv

    return JobEnv(Path("."), 0, sc.workload.steps, sc.workload.step_delay_s, dict(sc.system_options))
