"""What a finished run leaves: the verdict judged from its history, report.json with the exact
command that replays it, and the JUnit, HTML and Markdown pages beside it."""
from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from pschaos.reports import html, junit, markdown, report_json

from pschaos.harness.checkers.failover import failover_times
from pschaos.harness.history.clock import WallClock
from pschaos.harness.history.events import merge
from pschaos.harness.machinery import hostload, hostspeed
from pschaos.harness.run.judge import judge


class RunReport:
    """The reporting side of Runner (its base class): judge the history, write the report files."""

    # ---------------------------------------------------------------- verdict
    def _simulated(self) -> dict:
        """For a simulated run: that it is one, and the calibration file its timings come from."""
        cal = getattr(self.backend, "cal", None)
        if cal is None:
            return {}
        return {"simulated": {"calibration": cal.path, "measured": cal.measured,
                              "background_load": getattr(self.backend, "background_load", 0.0),
                              "host_slowdown": getattr(self.backend, "host_slowdown", 1.0)}}

    def _rerun(self, path: str) -> str:
        """The command that replays this run: a simulated one names its calibration file when it is
        not the committed one, its background load when it had one and its host slowdown when not 1 (review of the CPU model,
        M4: a validate run replayed with neither gave another history)."""
        cmd = f"pschaos run {path} --backend {self.backend_name} --seed {self.seed}"
        cal = getattr(self.backend, "cal", None)
        if cal is not None:
            from pschaos.harness.backends.sim.calibration import DEFAULT_PATH

            if cal.path != str(DEFAULT_PATH) and Path(cal.path).is_file():
                cmd += f" --calibration {shlex.quote(os.path.abspath(cal.path))}"
            bg = getattr(self.backend, "background_load", 0.0)
            if bg:
                cmd += f" --background {bg!r}"
            slow = getattr(self.backend, "host_slowdown", 1.0)
            if slow != 1.0:
                cmd += f" --host-slowdown {slow!r}"
        return cmd

    def context(self) -> dict:
        """What every checker may read (the workload, the schedule), then the system's own fields."""
        w, e = self.sc.workload, self.sc.expect
        return {"system": self.sc.system, "workers": [f"worker-{j}" for j in range(self.sc.cluster.workers)],
                "steps": w.steps, "duration_s": w.duration_s, "failover_budget_ms": e.failover_budget_ms,
                "stall_s": w.stall_s,
                "scheduled_faults": len(self.schedule), **self.system.context(self.sc), **self.prepared}

    def _judge(self, t_start: float) -> dict:
        sources = sorted({*self.backend.event_files(), self.history.path})   # sorted: ties merge in one order
        hist = merge(self.history.t0, sources, self.out / "history.jsonl")
        j = judge(hist)
        checks, m, verdict = j.checks, j.metrics, j.verdict
        if m.get("first_step_s") is not None and isinstance(self.clock, WallClock):   # from this process's launch
            import psutil

            launched = psutil.Process().create_time()
            m["first_step_from_launch_s"] = round(m["first_step_s"] + self.history.t0 - launched, 3)
        path = self.sc.path or f"scenarios/{self.sc.name}.yaml"
        rel = os.path.relpath(path)
        path = path if rel.startswith("..") else rel      # relative when run from inside the repo
        rerun = self._rerun(path)
        for f in self.faults_done:
            f["start_s"] = round(f["start_s"] - self.history.t0, 3)
            f["end_s"] = round(f["end_s"] - self.history.t0, 3)
        rep = report_json.build(self.sc.name, self.backend_name, self.seed, verdict, rerun,
                                {k: v.to_json() for k, v in checks.items()}, m, self.faults_done,
                                {"run_id": self.run_id, "wall_s": round(time.time() - t_start, 2),
                                 "unknown_reasons": {k: v.details.get("reason") or v.details.get("error")
                                                     for k, v in checks.items() if v.valid == "unknown"},
                                 "excluded_checks": j.expect.get("excluded", {}),
                                 "checks_not_applicable": j.expect.get("not_applicable", {}),
                                 "failover_times": failover_times(hist),
                                 "host_load": {**(hostload.summary(self.load_start, self.load_end)
                                                  if self.load_end is not None
                                                  else {"unknown": "the host's load could not be read at the end"}),
                                               **(hostspeed.over_training(self.speed, hist, self.history.t0)
                                                  if self.speed is not None else {})},
                                 **self._simulated(),
                                 **({"made_for": self.made_for} if getattr(self, "made_for", None) else {}),
                                 "history": str(self.out / "history.jsonl"),
                                 "scenario_spec": self.sc.model_dump()})
        report_json.write(rep, self.out)
        self.system.artifacts(hist, self.out)
        junit.write(rep, self.out)
        markdown.write(rep, self.out)
        html.write(rep, hist, self.out)
        return rep
