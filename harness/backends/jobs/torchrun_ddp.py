"""PyTorch DDP under torchrun: one agent on 127.0.0.1 forking `nproc` ranks that train with gloo.

The job is scripts/ddp_train.py (or the user's own `script` taking the same flags): a
deterministic MLP, a checkpoint every `ckpt_every` steps, resumed when torchrun restarts the
group after a rank fails (`max_restarts`). Roles: `agent` (the launched torchrun process, which
the harness restarts as a scheduler would when it dies) and `rank-<r>` (its children, found by
their RANK). A rank's links are its gloo connections and the agent's store port it holds.

Two settings stand for what torch does by default and what this project found it to do:
`shared_store: true` keeps torchrun's shared rendezvous TCPStore (TORCH_DISABLE_SHARE_RDZV_TCP_STORE
unset), with which a restarted group read the previous round's gloo addresses and never
connected (docs/findings/torchrun-restart-shared-store.md); `warmup: false` drops the script's
zero backward after DDP is built, with which a resumed run drifts from an uninterrupted one by
float rounding (docs/findings/ddp-first-backward.md).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psutil

from pschaos.harness.backends.jobs.api import TrainingJob

SCRIPT = Path(__file__).parent / "scripts" / "ddp_train.py"


class TorchrunDDP(TrainingJob):
    name = "torchrun-ddp"
    kinds = ("kill", "stop", "pause", "loss", "partition")
    loopback_only = True          # torch's TCPStore servers bind every interface: kept on 127.0.0.1
    options = {"nproc": (int, 3), "ckpt_every": (int, 20), "max_restarts": (int, 3), "timeout_s": (float, 10.0),
               "hang_bound_s": (float, 60.0), "job_restarts": (int, 2), "shared_store": (bool, False),
               "warmup": (bool, True), "tolerance": (float, 0.0), "script": (str, "")}

    @classmethod
    def scenario_error(cls, copies: int, options: dict[str, Any]) -> str | None:
        if not 1 <= options["nproc"] <= 8:
            return f"system_options.nproc: {options['nproc']} ranks; give 1 to 8 (they share this machine's cores)"
        if options["ckpt_every"] < 1:
            return "system_options.ckpt_every: give a checkpoint interval of at least 1 step"
        if options["script"] and not Path(options["script"]).is_file():
            return f"system_options.script: {options['script']!r} is not a file; give the path of your training script"
        return None

    @classmethod
    def role_names(cls, options: dict[str, Any]) -> list[str]:
        return ["agent"] + [f"rank-{r}" for r in range(options["nproc"])]

    def launch(self) -> dict[str, list[str]]:
        o = self.opt
        self.store_port = self.env.ports(1)[0]
        argv = [str(Path(sys.executable).with_name("torchrun")), "--nnodes", "1", "--nproc-per-node", str(o["nproc"]),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{self.store_port}", "--max-restarts",
                str(o["max_restarts"]), "--monitor-interval", "0.5", o["script"] or str(SCRIPT),
                "--steps", str(self.env.steps), "--ckpt-every", str(o["ckpt_every"]), "--dir",
                str(self.env.data("job")), "--seed", str(self.env.seed), "--timeout-s", str(o["timeout_s"]),
                "--step-delay-s", str(self.env.step_delay_s)]
        return {"agent": argv + ([] if o["warmup"] else ["--no-warmup"])}

    def environment(self, name: str) -> dict[str, str]:
        # gloo and NCCL on the loopback device: by default they bind the address the hostname resolves to
        lo = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}
        return lo if self.opt.get("shared_store", True) else {**lo, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}

    @classmethod
    def checkpoint_roles(cls, options: dict[str, Any]) -> list[str]:
        return ["rank-0"]

    def pid(self, role: str, launched: dict[str, int]) -> int | None:
        agent = launched.get("agent")
        if role == "agent" or agent is None:
            return agent
        want, found = role.removeprefix("rank-"), []
        try:          # the agent's own children: a rank's DataLoader workers inherit its RANK too
            for c in psutil.Process(agent).children():
                try:
                    env = c.environ()
                    if env.get("RANK") == want and env.get("LOCAL_RANK") is not None and \
                            c.status() != psutil.STATUS_ZOMBIE:
                        found.append((c.create_time(), c.pid))
                except psutil.Error:
                    continue
        except psutil.Error:
            return None
        return max(found)[1] if found else None      # the newest: a dying round's may linger

    def links(self) -> list[tuple[str, str]]:
        """Every rank talks to every other (gloo's full mesh) and to the agent's store."""
        ranks = [f"rank-{r}" for r in range(self.opt["nproc"])]
        return [(a, b) for a in ranks + ["agent"] for b in ranks if a != b] + [(r, "agent") for r in ranks]

    def ports_of(self, role: str) -> list[int]:
        """A rank's own ends of its TCP sockets now: gloo's listener, its connections to the other
        ranks and to the agent's store. A cut drops all of it; a rank torchrun starts again gets
        new ports, which the cut does not follow (the agent's store port would: `agent`)."""
        if role == "agent":
            return [self.store_port] if getattr(self, "store_port", None) else []
        pid = self.pid(role, self.running())
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp") if pid else []
        except psutil.Error:
            return []
        return sorted({c.laddr.port for c in conns if c.laddr and c.laddr.ip in ("127.0.0.1", "::ffff:127.0.0.1")})

    def plan(self) -> dict[str, Any]:
        o = self.opt
        return {"steps": self.env.steps, "ckpt_every": o["ckpt_every"], "hang_bound_s": o["hang_bound_s"],
                "tolerance": o["tolerance"], "ranks": [f"rank-{r}" for r in range(o["nproc"])],
                "timeout_s": o["timeout_s"], "max_restarts": o["max_restarts"]}
