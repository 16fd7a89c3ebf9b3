"""Workers in a simulated run: psnodes' own Worker and PSClient, each in a thread on virtual time.

Only the machine is swapped (pschaos.psnodes.runtime.Runtime: clocks, sleep, pool, the compute time of a
step from the calibration) and the client's transport (harness/backends/sim/transport.py). A kill marks
the incarnation dead: its next wait raises `Killed`, so it stops where a SIGKILL would have left
it (a call in flight may still land on the server, as a real one can); a restart is a new
incarnation with the same arguments, as the process backend restarts a worker. A pause
(SIGSTOP) holds every thread of the incarnation at its next wait (a sleep, the compute of a step,
the end of a call: what a call in flight did on the server stands, its answer waits) until the
resume or a kill. A step's compute is the worker's CPU on the host's shared cores
(harness/backends/sim/cpu.py): steps slow down when more runs; so is the calibrated leftover
(`worker_overhead_s`) with a calibration from before the workers' CPU was measured, a wait with
one after (calibration.py worker_cpu_measured).
"""
from __future__ import annotations

import math
import random
import traceback
from dataclasses import dataclass
from typing import Any

import torch

from pschaos.psnodes.events import EventLog
from pschaos.psnodes.runtime import Runtime
from pschaos.psnodes.worker import Worker

from pschaos.harness.backends.sim.transport import Killed, SimEtcdClient, SimPool, SimStub
from pschaos.harness.backends.sim.vtime import Baton


@dataclass
class Incarnation:
    name: str
    n: int
    args: tuple
    baton: Baton | None = None
    dead: bool = False
    paused: bool = False
    events: EventLog | None = None
    resumed: Any = None         # a SimPy event: fires at the resume (or kill) of a paused one
    worker: Any = None          # the psnodes Worker (a SIGTERM sets its stop flag)


class SimWorkers:
    def __init__(self, backend: Any) -> None:
        self.be = backend
        self.live: dict[str, Incarnation] = {}
        self.count: dict[str, int] = {}

    def planned(self) -> list[str]:
        return sorted({f"worker-{j}" for j in range(self.be.spec.workers)} | set(self.live),
                      key=lambda n: int(n.split("-")[1]))

    def names(self) -> list[str]:
        return list(self.live)

    def start_all(self, steps: int, duration: float | None, step_delay: float) -> None:
        for j in range(self.be.spec.workers):
            self.start(f"worker-{j}", steps, duration, step_delay)

    def start(self, name: str, steps: int, duration: float | None = None, step_delay: float = 0.0) -> None:
        n = self.count[name] = self.count.get(name, 0) + 1
        inc = self.live[name] = Incarnation(name, n, (steps, duration, step_delay))
        be, clock, vt = self.be, self.be.clock, self.be.vt
        pid = 50_000 + 100 * int(name.split("-")[1]) + n

        def gate() -> bool:
            """Hold while paused; whether the incarnation is dead (the transports' `dead`)."""
            while inc.paused and not inc.dead:
                vt.wait_event(inc.resumed)
            return inc.dead

        def sleep(s: float) -> None:
            clock.sleep(s)
            if gate():
                raise Killed(name)
        mode = (be.spec.model, be.spec.replication, be.spec.training)
        step_s, jitter = be.cal.step_s(*mode), be.cal.jitter(*mode)
        # one stream per incarnation, from the run's seed: a worker's draws never shift another's
        draws = random.Random(f"pschaos-step:{be.seed}:{name}:{n}")
        eval_s = be.cal.eval_s(*mode)

        def spend(s: float) -> None:
            """The worker's CPU: `s` seconds on the host's shared cores (harness/backends/sim/cpu.py)."""
            if gate():                          # killed meanwhile: a dead process spends nothing
                raise Killed(name)
            job = be.cpu.submit(s, name)        # the worker's process: its calls' CPU takes turns with it
            try:
                vt.wait_event(job.done)
            finally:
                be.cpu.cancel(job)          # a no-op once served; a thread unwound meanwhile leaves the CPU
            if gate():
                raise Killed(name)

        # with the workers' CPU measured, only the compute is CPU; the overhead and an eval pass's
        # cost are time beyond every measured CPU second (calibration.py worker_cpu_measured)
        cpu_s = be.cal.compute_s(be.spec.model) if be.cal.worker_cpu_measured else step_s

        def wait(s: float) -> None:
            if s > 0:
                sleep(s)

        def compute(what: str) -> None:
            if what == "eval":     # no draw: the steps' times are the same with evaluation on or off
                (wait if be.cal.worker_cpu_measured else spend)(eval_s)
                return
            j = math.exp(jitter * draws.gauss(0.0, 1.0)) if jitter else 1.0
            spend(cpu_s * j)
            wait((step_s - cpu_s) * j)
        rt = Runtime(monotonic=clock.monotonic, sleep=sleep, time=clock.now, pid=lambda: pid,
                     pool=lambda k, prefix: SimPool(vt, f"{name}-{prefix}"), compute=compute)
        dead = gate
        inc.events = EventLog(be.events_path(name), name, runtime=rt)
        cfg = be.cfg.client_view()
        call_extra_s = be.cal.client_cpu_extra(*mode)

        def run() -> None:
            torch.set_num_threads(1)
            from pschaos.psnodes.client.client import PSClient

            client = PSClient(cfg, name, None, inc.events, runtime=rt, etcd=SimEtcdClient(be, name, dead),
                              stub_factory=lambda node: SimStub(be, name, node, dead, call_extra_s))
            w = inc.worker = Worker(cfg, name, be.spec.model, be.spec.training, be.spec.staleness, "cpu", None,
                                    inc.events, step_delay=step_delay, runtime=rt, client=client,
                                    eval_every=be.spec.eval_every)
            try:
                w.run(steps, duration)
            except Killed:
                pass
            except Exception:  # noqa: BLE001 - a crashed worker, as a process's: its traceback in its log
                log = be.run_dir / "logs" / f"{name}.log"
                log.parent.mkdir(parents=True, exist_ok=True)
                with open(log, "a") as f:
                    f.write(f"{name} (incarnation {n}) crashed at virtual t={clock.monotonic():.3f}:\n"
                            + traceback.format_exc())
                raise
        inc.baton = vt.spawn(run, name)

    def alive(self, name: str) -> bool:
        inc = self.live.get(name)
        return inc is not None and not inc.dead and inc.baton is not None and not inc.baton.done.triggered

    def running(self) -> bool:
        return any(self.alive(n) for n in self.live)

    def kill(self, name: str, graceful: bool = False) -> None:
        """SIGKILL; `graceful`: SIGTERM, as psnodes/worker.py takes it (the step in progress ends,
        train-done is written), then a kill if it has not ended within 5 s, as Proc.stop does."""
        inc = self.live.get(name)
        if inc is None:
            return
        self.resume(name)          # a paused one is reached too (SIGKILL and SIGTERM reach a stopped process)
        worker = getattr(inc, "worker", None)
        if graceful and worker is not None and not inc.dead:
            worker.stop = True
            if self.be.vt.join(inc.baton, 5.0):
                return
        inc.dead = True
        # its CPU leaves the host's cores now: a job it was spending (a step, a call's encoding)
        # ends with Killed at its waiter, so a restarted incarnation does not queue behind it
        self.be.cpu.abort_owner(name, Killed(name))

    def pause(self, name: str) -> None:
        inc = self.live.get(name)
        if inc is not None and not inc.dead and not inc.paused:
            inc.paused = True
            inc.resumed = self.be.env.event()

    def resume(self, name: str) -> None:
        inc = self.live.get(name)
        if inc is not None and inc.paused:
            inc.paused = False
            inc.resumed.succeed()

    def restart(self, name: str) -> None:
        inc = self.live[name]
        self.start(name, *inc.args)

    def kill_all(self) -> None:
        for name, inc in self.live.items():
            inc.dead = True
            self.resume(name)
            if inc.events is not None:
                inc.events.close()


__all__ = ["SimWorkers"]
