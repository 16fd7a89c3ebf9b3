"""HF Accelerate: the DDP job launched with `accelerate launch`, resumed with `load_state`.

The job is scripts/accelerate_train.py (or the user's own `script` taking the same flags): the
same MLP, data and audit as the torchrun job, written the Accelerate way (`prepare`,
`backward`, `save_state` every `ckpt_every` steps, `load_state` of the newest on a restart).
`accelerate launch --multi_gpu` runs torch's elastic agent in its own process with the
rendezvous Accelerate picks on one machine (static, at `--main_process_port` on 127.0.0.1),
and forks the ranks; `--max_restarts` restarts the group when a rank fails. The script trains on
the CPU (gloo) with `--cpu`, the flag `accelerate launch --cpu` itself would take to mean one
process. HF_HOME points into the run folder, so a user's `accelerate config` file never
changes what the scenario runs. Roles and faults are the torchrun job's: `agent` (the launcher)
and `rank-<r>`.

`group_per_round: false` leaves the process group to Accelerate, as most scripts do; with it a
restarted group never connects (docs/findings/accelerate-static-restart.md). By default the
script builds the group itself on the agent's store under a prefix of the restart round.
"""
from __future__ import annotations

import sys
from pathlib import Path
from pschaos.harness.backends.jobs.torchrun_ddp import TorchrunDDP
from pschaos.harness.errors import HarnessError

SCRIPT = Path(__file__).parent / "scripts" / "accelerate_train.py"


class AccelerateDDP(TorchrunDDP):
    name = "accelerate-ddp"
    options = {"nproc": (int, 3), "ckpt_every": (int, 20), "max_restarts": (int, 3), "timeout_s": (float, 10.0),
               "hang_bound_s": (float, 60.0), "job_restarts": (int, 2), "tolerance": (float, 0.0),
               "group_per_round": (bool, True), "script": (str, "")}

    def launch(self) -> dict[str, list[str]]:
        o = self.opt
        accelerate = Path(sys.executable).with_name("accelerate")
        if not accelerate.is_file():      # asked at the run: listing the library needs no Accelerate
            raise HarnessError(f"{self.name}: no `accelerate` beside {sys.executable}; install it into the "
                               "environment pschaos runs in: pip install 'pschaos[accelerate]'")
        self.store_port = self.env.ports(1)[0]
        argv = [str(accelerate), "launch", "--multi_gpu", "--num_processes", str(o["nproc"]), "--num_machines", "1",
                "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(self.store_port),
                "--max_restarts", str(o["max_restarts"]), "--monitor_interval", "0.5", o["script"] or str(SCRIPT),
                "--steps", str(self.env.steps), "--ckpt-every", str(o["ckpt_every"]), "--dir",
                str(self.env.data("job")), "--seed", str(self.env.seed), "--timeout-s", str(o["timeout_s"]),
                "--step-delay-s", str(self.env.step_delay_s), "--cpu"]
        return {"agent": argv + (["--group-per-round"] if o["group_per_round"] else [])}

    def environment(self, name: str) -> dict[str, str]:
        return {**super().environment(name), "HF_HOME": str(self.env.data("hf-home"))}
