"""The training-job API: what a user writes to put a training job of their own under pschaos.

A job is processes the harness starts and supervises, not a store it drives: the job trains by
itself, and its script records each logical update through the step shim (shim/pschaos_shim.py).
A `TrainingJob` says:

- **processes**: `launch()` gives the command line of every process the harness starts (a
  torchrun agent; a coordinator, workers and parameter-server tasks), each tagged with the run
  id so `pschaos clean` reaps them; `roles()` names every fault target, launched or not (the
  ranks torchrun forks), and `pid(role)` finds a role's process now.
- **supervision**: a launched process that exits non-zero before the job finished is started
  again with the next incarnation (PSCHAOS_INCARNATION), as a cluster scheduler restarts a
  failed job, at most `job_restarts` times; `done()` says the job finished.
- **faults**: `kinds` the job takes (process faults: kill, stop, pause; with `links()` and
  `ports_of(role)`, link faults: loss and partition as nftables drops on the ports of the one
  role every cut link touches; with `proxied_roles()`, latency and bandwidth on a Toxiproxy proxy
  its clients dial instead of it) and `fault_error(kind, role)`, which refuses by name, when the
  scenario loads, a fault the job cannot take.
- **the plan**: `steps` (the logical updates asked for), `ckpt_every`, the collective timeout
  and the hang bound the checkers judge by (`plan()`).

docs/training-jobs.md has the whole contract and an example; torchrun_ddp.py is one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

from pschaos.harness.backends.options import OptionsMixin
from pschaos.harness.machinery.ports import free_ports

SHIM_DIR = Path(__file__).parent / "shim"        # on every job process's PYTHONPATH
# the checks that judge a training job black-box (harness/checkers/jobs.py)
JOB_CHECKS = ("no-lost-acks", "exactly-once", "resume-exact", "lost-work-bounded", "no-silent-hang",
              "restarts-bounded")
JOB_KINDS = ("kill", "stop", "pause")
LINK_KINDS = ("loss", "partition")            # nftables drops on one role's ports (adapters/portcut.py)
TOXIC_KINDS = ("latency", "bandwidth")        # Toxiproxy toxics on the proxies of `proxied_roles()`
LINK_GROUPS = ("workers", "nodes")            # groups a link target may name besides roles


@dataclass
class JobEnv:
    """What the harness hands a job: its folder, the seed, the steps asked for, its options."""

    run_dir: Path
    seed: int
    steps: int
    step_delay_s: float = 0.0
    options: dict[str, Any] = field(default_factory=dict)

    def ports(self, n: int) -> list[int]:
        return free_ports(n)

    def data(self, name: str) -> Path:
        d = self.run_dir / "data" / name
        d.mkdir(parents=True, exist_ok=True)
        return d


class TrainingJob(OptionsMixin):
    """Subclass and fill in; the methods below are the whole contract."""

    name: ClassVar[str] = ""
    checks: ClassVar[tuple[str, ...]] = JOB_CHECKS
    default_checks: ClassVar[tuple[str, ...]] = JOB_CHECKS
    kinds: ClassVar[tuple[str, ...]] = JOB_KINDS
    options: ClassVar[dict[str, tuple[type, Any]]] = {}
    progress_role: ClassVar[str] = "rank-0"      # whose shim steps the runner's step triggers follow
    loopback_only: ClassVar[bool] = False        # binds every interface: pschaos keeps it on loopback

    def __init__(self, env: JobEnv) -> None:
        self.env, self.opt = env, env.options
        self.via: dict[str, str] = {}      # role -> the proxy address its clients dial (latency, bandwidth)
        # the harness's launched processes now, by name (set by the harness): for `ports_of` of a
        # role whose ports are only known once it runs (a rank's gloo sockets)
        self.running: Callable[[], dict[str, int]] = dict

    @classmethod
    def role_names(cls, options: dict[str, Any]) -> list[str]:
        """Every role a fault may target, from the options alone (checked when a scenario loads)."""
        raise NotImplementedError

    @classmethod
    def fault_error(cls, kind: str, role: str, options: dict[str, Any]) -> str | None:
        """Why this job cannot take fault `kind` on `role`, with the fix; None when it can."""
        if kind not in cls.kinds:
            return f"{cls.name} takes the fault kinds {', '.join(cls.kinds)}, not {kind}"
        if kind in LINK_KINDS + TOXIC_KINDS and role in LINK_GROUPS:
            return None
        if role not in cls.role_names(options):
            return f"{role!r} is not a role of {cls.name}; its roles: {', '.join(cls.role_names(options))}"
        return None

    @classmethod
    def checkpoint_roles(cls, options: dict[str, Any]) -> list[str]:
        """The roles that write checkpoints through the shim: a kill `during: checkpoint` may
        target these only (every role by default)."""
        return cls.role_names(options)

    def roles(self) -> list[str]:
        return self.role_names(self.opt)

    def launch(self) -> dict[str, list[str]]:
        """The processes the harness starts and supervises, by name."""
        raise NotImplementedError

    def environment(self, name: str) -> dict[str, str]:
        """Extra environment for a launched process (the shim's own is set by the harness)."""
        return {}

    def links(self) -> list[tuple[str, str]]:
        """The directed links (client role, serving role) a link fault may be aimed at, once
        launched; none by default (a job with links adds "loss" and "partition" to `kinds`)."""
        return []

    def ports_of(self, role: str) -> list[int]:
        """The ports a role serves on: a link fault that isolates it drops their packets, both ways."""
        return []

    def proxied_roles(self) -> list[str]:
        """Roles its clients can reach through a Toxiproxy proxy, for latency and bandwidth (add
        "latency", "bandwidth" to `kinds`). When a scenario has such a fault the harness makes one
        proxy per role, to its first port, after `launch()` and before `environment()`, and puts
        its address in `self.via[role]`: the environment then points the clients at it."""
        return []

    def pid(self, role: str, launched: dict[str, int]) -> int | None:
        """A role's process now (`launched`: the harness's processes by name), or None."""
        return launched.get(role)

    def done(self, exit_code: int) -> bool:
        """The job finished (a launched process exited `exit_code`): no restart."""
        return exit_code == 0

    def restart_scope(self, name: str) -> str:
        """What a scheduler restarts when launched process `name` fails: "job" (every process, a
        new incarnation: torchrun's agent) or "process" (that one alone, as Kubernetes restarts
        one pod of a TF cluster, whose coordinator is built to ride it out)."""
        return "job"

    def finished(self, exited: dict[str, int], launched: list[str]) -> bool:
        """The job is over, given the launched processes (`launched`) that have exited and their
        codes: by default when every one of them exited done."""
        return set(exited) == set(launched) and all(self.done(rc) for rc in exited.values())

    def plan(self) -> dict[str, Any]:
        """What the checkers judge by: steps, ckpt_every, hang_bound_s, tolerance, ranks."""
        raise NotImplementedError
