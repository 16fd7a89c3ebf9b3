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
the checkpoint). Link faults (loss, partition) drop packets on a parameter server's port: every
task's traffic to it, the workers' and the coordinator's (one port on loopback serves them all).
Latency and bandwidth are Toxiproxy toxics on a proxy in front of each parameter server, which
every other task's TF_CONFIG names instead of it (the coordinator hands its cluster to the
workers, so their closures' traffic takes the proxy too).
TF's gRPC servers bind every interface whatever TF_CONFIG says, so the tasks
run with pschaos' loopback preload (jobs/loopback).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pschaos.harness.backends.jobs.api import JOB_KINDS, LINK_KINDS, TOXIC_KINDS, TrainingJob
from pschaos.harness.errors import HarnessError

SCRIPT = Path(__file__).parent / "scripts" / "tf_ps_train.py"


def tf_python(options: dict[str, Any]) -> str:
    return options["python"] or os.environ.get("PSCHAOS_TF_PYTHON", "")


class TFParameterServer(TrainingJob):
    name = "tf-ps"
    options = {"workers": (int, 2), "ps": (int, 2), "ckpt_every": (int, 20), "hang_bound_s": (float, 60.0),
               "step_timeout_s": (float, 30.0), "tail_work": (int, 0), "tail_step": (int, 0), "job_restarts": (int, 4),
               "tolerance": (float, 0.0), "python": (str, ""), "script": (str, "")}
    progress_role = "chief"
    loopback_only = True
    kinds = JOB_KINDS + LINK_KINDS + TOXIC_KINDS

    @classmethod
    def scenario_error(cls, copies: int, options: dict[str, Any]) -> str | None:
        if not 1 <= options["workers"] <= 4 or not 1 <= options["ps"] <= 4:
            return "system_options.workers and .ps: give 1 to 4 of each (they share this machine's cores)"
        if options["ckpt_every"] < 1:
            return "system_options.ckpt_every: give a checkpoint interval of at least 1 step"
        if options["python"] and not Path(options["python"]).is_file():
            return (f"system_options.python: {options['python']} is not a Python; give the interpreter of an "
                    "environment with tensorflow-cpu installed, or set PSCHAOS_TF_PYTHON (make tf-venv builds one)")
        if options["script"] and not Path(options["script"]).is_file():
            return f"system_options.script: {options['script']!r} is not a file; give the path of your training script"
        return None

    @classmethod
    def role_names(cls, options: dict[str, Any]) -> list[str]:
        return (["chief"] + [f"worker-{i}" for i in range(options["workers"])]
                + [f"ps-{i}" for i in range(options["ps"])])

    @classmethod
    def checkpoint_roles(cls, options: dict[str, Any]) -> list[str]:
        return ["chief"]

    def launch(self) -> dict[str, list[str]]:
        o = self.opt
        py = tf_python(o)       # asked at the run, not when the scenario loads: listing needs no TensorFlow
        if not py or not Path(py).is_file():
            raise HarnessError(f"{self.name}: no TensorFlow Python ({py or 'PSCHAOS_TF_PYTHON unset'}); set "
                               "system_options.python or PSCHAOS_TF_PYTHON to the interpreter of an environment "
                               "with tensorflow-cpu installed (make tf-venv builds one)")
        ports = iter(self.env.ports(1 + o["workers"] + o["ps"]))
        self.cluster = {"chief": [f"127.0.0.1:{next(ports)}"],
                        "worker": [f"127.0.0.1:{next(ports)}" for _ in range(o["workers"])],
                        "ps": [f"127.0.0.1:{next(ports)}" for _ in range(o["ps"])]}
        argv = [tf_python(o), o["script"] or str(SCRIPT), "--steps", str(self.env.steps), "--ckpt-every",
                str(o["ckpt_every"]), "--dir", str(self.env.data("job")), "--seed", str(self.env.seed),
                "--step-delay-s", str(self.env.step_delay_s), "--step-timeout-s", str(o["step_timeout_s"]),
                "--tail-work", str(o["tail_work"]), "--tail-step", str(o["tail_step"])]
        return {role: argv for role in self.roles()}

    def environment(self, name: str) -> dict[str, str]:
        kind, _, index = name.partition("-")
        task = {"type": kind, "index": int(index or 0)}
        # through the proxies where there are (a task's own entry stays its real address, which it binds)
        ps = [self.via.get(f"ps-{j}", a) if name != f"ps-{j}" else a for j, a in enumerate(self.cluster["ps"])]
        cluster = {**self.cluster, "ps": ps}
        return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": task}), "PSCHAOS_NODE": name,
                "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}

    def links(self) -> list[tuple[str, str]]:
        """Every task dials the parameter servers (workers run the closures' reads and updates, the
        coordinator creates, saves and reads the variables): a cut of `ps-<j>` drops them all."""
        clients = ["chief"] + [f"worker-{i}" for i in range(self.opt["workers"])]
        return [link for c in clients for j in range(self.opt["ps"]) for link in ((c, f"ps-{j}"), (f"ps-{j}", c))]

    def ports_of(self, role: str) -> list[int]:
        """A parameter server's port (the servers the links lead to; the others are dialled by the
        coordinator alone, which a cut of theirs would not isolate)."""
        kind, _, index = role.partition("-")
        addrs = self.cluster.get("ps", []) if kind == "ps" and index.isdigit() else []
        return [int(addrs[int(index)].rsplit(":", 1)[1])] if addrs and int(index) < len(addrs) else []

    def proxied_roles(self) -> list[str]:
        return [f"ps-{j}" for j in range(self.opt["ps"])]

    def restart_scope(self, name: str) -> str:
        return "process"

    def finished(self, exited: dict[str, int], launched: list[str]) -> bool:
        return exited.get("chief") == 0          # the servers serve until they are stopped

    def plan(self) -> dict[str, Any]:
        o = self.opt
        return {"steps": self.env.steps, "ckpt_every": o["ckpt_every"], "hang_bound_s": o["hang_bound_s"],
                "tolerance": o["tolerance"], "ranks": ["chief"], "workers": o["workers"], "ps": o["ps"]}
