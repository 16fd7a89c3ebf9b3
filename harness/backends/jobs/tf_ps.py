"""TensorFlow's ParameterServerStrategy: a coordinator, workers and parameter-server tasks.

The job is scripts/tf_ps_train.py (or the user's own `script` taking the same flags), one local
process per task on 127.0.0.1, each told its place by TF_CONFIG: `chief` (the coordinator,
scheduling one closure per step through ClusterCoordinator and checkpointing every `ckpt_every`
steps), `worker-<i>` and `ps-<i>` (tf.distribute.Server, serving until killed). TF runs in its
own Python (`python`, or PSCHAOS_TF_PYTHON; `make test` builds tools/tf-venv): the harness never
imports it.

Restarts are a scheduler's, one task at a time: a task that exits is started again alone, as
Kubernetes restarts one pod of a TF cluster, and the coordinator is what must ride it out. TF
documents that it reschedules a failed worker's closures on another worker, and that a failed
parameter server fails the step (the coordinator raises, exits, and its restart resumes from
the checkpoint). TF's gRPC servers bind every interface whatever TF_CONFIG says, so the tasks
run with pschaos' loopback preload (jobs/loopback).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pschaos.harness.backends.jobs.api import TrainingJob

SCRIPT = Path(__file__).parent / "scripts" / "tf_ps_train.py"


def tf_python(options: dict[str, Any]) -> str:
    return options["python"] or os.environ.get("PSCHAOS_TF_PYTHON", "")


class TFParameterServer(TrainingJob):
    name = "tf-ps"
    options = {"workers": (int, 2), "ps": (int, 2), "ckpt_every": (int, 20), "hang_bound_s": (float, 60.0),
               "job_restarts": (int, 4), "tolerance": (float, 0.0), "python": (str, ""), "script": (str, "")}
    progress_role = "chief"
    loopback_only = True

    @classmethod
    def scenario_error(cls, copies: int, options: dict[str, Any]) -> str | None:
        if not 1 <= options["workers"] <= 4 or not 1 <= options["ps"] <= 4:
            return "system_options.workers and .ps: give 1 to 4 of each (they share this machine's cores)"
        if options["ckpt_every"] < 1:
            return "system_options.ckpt_every: give a checkpoint interval of at least 1 step"
        py = tf_python(options)
        if not py or not Path(py).is_file():
            return (f"system_options.python: {py or '(unset)'} is not a Python; give the interpreter of an "
                    "environment with tensorflow-cpu installed, or set PSCHAOS_TF_PYTHON (make tf-venv builds one)")
        if options["script"] and not Path(options["script"]).is_file():
            return f"system_options.script: {options['script']!r} is not a file; give the path of your training script"
        return None

    @classmethod
    def role_names(cls, options: dict[str, Any]) -> list[str]:
        return (["chief"] + [f"worker-{i}" for i in range(options["workers"])]
                + [f"ps-{i}" for i in range(options["ps"])])

    def launch(self) -> dict[str, list[str]]:
        o = self.opt
        ports = iter(self.env.ports(1 + o["workers"] + o["ps"]))
        self.cluster = {"chief": [f"127.0.0.1:{next(ports)}"],
                        "worker": [f"127.0.0.1:{next(ports)}" for _ in range(o["workers"])],
                        "ps": [f"127.0.0.1:{next(ports)}" for _ in range(o["ps"])]}
        argv = [tf_python(o), o["script"] or str(SCRIPT), "--steps", str(self.env.steps), "--ckpt-every",
                str(o["ckpt_every"]), "--dir", str(self.env.data("job")), "--seed", str(self.env.seed),
                "--step-delay-s", str(self.env.step_delay_s)]
        return {role: argv for role in self.roles()}

    def environment(self, name: str) -> dict[str, str]:
        kind, _, index = name.partition("-")
        task = {"type": kind, "index": int(index or 0)}
        return {"TF_CONFIG": json.dumps({"cluster": self.cluster, "task": task}), "PSCHAOS_NODE": name,
                "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}

    def restart_scope(self, name: str) -> str:
        return "process"

    def finished(self, exited: dict[str, int], launched: list[str]) -> bool:
        return exited.get("chief") == 0          # the servers serve until they are stopped

    def plan(self) -> dict[str, Any]:
        o = self.opt
        return {"steps": self.env.steps, "ckpt_every": o["ckpt_every"], "hang_bound_s": o["hang_bound_s"],
                "tolerance": o["tolerance"], "ranks": ["chief"], "workers": o["workers"], "ps": o["ps"]}
