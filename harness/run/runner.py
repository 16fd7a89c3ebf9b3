"""Run one scenario: start the cluster, train, inject the faults on schedule, heal, observe, judge.

Teardown always runs (failures, Ctrl-C, SIGTERM); what a SIGKILLed harness leaves, `pschaos
clean` reaps by the run tag. The seed drives the cluster, the data and every random choice, and
the report prints the exact command that replays the run.
"""
from __future__ import annotations

import os
import random
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pschaos.harness.run.report import RunReport
from pschaos.harness.machinery import hostload, hostspeed
from pschaos.harness.machinery.registry import fresh_out
from pschaos.harness.backends.base import Backend
from pschaos.harness.history.clock import WallClock, clock_of
from pschaos.harness.errors import HarnessError
from pschaos.harness.faults import LINK_KINDS, Fault, FaultContext, build
from pschaos.harness.faults.registry import NO_TARGET
from pschaos.harness.history.events import History, StepWatcher
from pschaos.harness.run.shared_runs import NOTE, SharedRuns, key_of
from pschaos.harness.run.progress import Progress
from pschaos.harness.run.nemesis import schedule as nemesis_schedule, waits
from pschaos.harness.run.scenario import Scenario
from pschaos.harness.run.stall import StallWatch, holding, running_on
from pschaos.harness.faults.targets import resolve
from pschaos.harness.backends.systems import system_named


@dataclass
class OpenFault:
    spec_index: int
    kind: str
    target: str
    fault: Fault
    start_t: float
    heal_at_t: float | None = None
    heal_at_step: int | None = None


BackendFactory = Callable[[Scenario, Path, str, int], Backend]


SYSTEM_DIRS = {"/", "/usr", "/etc", "/var", "/run", "/proc", "/sys", "/dev", "/boot", "/bin", "/lib", "/lib64",
               "/sbin"}


def refuse_out(out_dir: Path) -> None:
    """An --out that is `/` or a top-level system folder is refused: the run folder OUT/run is
    deleted on reuse and bind-mounted writable into containers (`--out /` made it /run)."""
    resolved = Path(os.path.abspath(out_dir)).resolve()
    if str(resolved) in SYSTEM_DIRS:
        raise HarnessError(f"--out {out_dir}: {resolved} is a system folder; give a folder of its own, "
                           "e.g. --out out/my-run")


RESEND_S = 0.5    # a stop signal is sent again this soon if the run is not tearing down (_on_term)


class Runner(RunReport):
    """Drives one run through the Backend protocol only, on the backend's clock: the schedule,
    the observation and the judging are the same code whatever the backend is."""

    def __init__(self, scenario: Scenario, seed: int, out_dir: Path, backend: str = "process",
                 quiet: bool = False, keep_data: bool = False, make_backend: BackendFactory | None = None,
                 shared: SharedRuns | None = None, made_for: str | None = None) -> None:
        self.system = system_named(scenario.system)      # what runs, and how it is observed
        factory = make_backend or self.system.backend_factory(backend)    # refuses a backend it has not
        refuse_out(out_dir)
        self.sc, self.seed, self.out, self.backend_name = scenario, seed, out_dir, backend
        self.quiet = quiet
        self.keep_data = keep_data
        self.progress = Progress(scenario.name, scenario.workload.steps, enabled=not quiet)
        self.rng = random.Random(seed)
        # a simulated run touches nothing shared, so its id comes from the seed alone (byte-identical replays)
        self.run_id = f"{scenario.name}-{seed}-" + ("sim" if backend == "sim" else uuid.uuid4().hex[:6])
        self.make_backend = factory
        self.shared = shared      # runs this session already made for others (run/shared_runs.py)
        self.made_for = made_for  # the run this one was made for (its fault-free run): not a run of a suite
        # before the backend exists: a backend may create its run folder at once
        fresh_out(self.out, self.run_id, ("run", "history.jsonl", "report.json", NOTE))
        self.backend = self.make_backend(scenario, out_dir / "run", self.run_id, seed)
        self.clock = clock_of(self.backend)
        self.drawn = nemesis_schedule(scenario.nemesis, seed) if scenario.nemesis else []
        self.schedule = list(scenario.faults) + self.drawn
        self.history: History | None = None
        self.open: list[OpenFault] = []
        self.faults_done: list[dict] = []
        self.watch: StepWatcher | None = None
        self.stall: StallWatch | None = None
        self.t0_drive = self.clock.monotonic()
        self.stalled = False

    def say(self, msg: str) -> None:
        self.progress.note(msg)

    # ------------------------------------------------------------------ main
    def _run_another(self, sc: Scenario, out: Path) -> dict:
        """Another scenario run as this one is (seed, backend, backend factory), quietly, for a
        system that needs one before its run; the system gets this function, never a runner. With
        a store, a run the session already made is copied instead of made again."""
        def make(folder: Path) -> dict:
            return Runner(sc, self.seed, folder, self.backend_name, quiet=True, make_backend=self.make_backend,
                          made_for=self.sc.name).run()

        if self.shared is None:
            return make(out)
        return self.shared.run(key_of(sc, self.seed, self.backend_name, self.system), out, make)

    def run(self) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        self.history = History(self.backend.events_path("harness"), self.clock)
        t_start = time.time()       # wall_s: what the run cost in real time, whatever its clock
        self.load_start = hostload.sample()     # report.json host_load: what else ran meanwhile
        self.speed: hostspeed.SpeedProbe | None = None
        self.prepared = self.system.prepare(self.sc, self.out, self._run_another, self.say)
        self.tearing_down = False
        trapped = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
        prev = {sig: signal.signal(sig, self._on_term) for sig in trapped}   # SIGINT too: a shell may have
        try:                                                               # left it ignored (a background job)
            what = (f"{self.system.name}" if hasattr(self.system, "job") else
                    f"{self.sc.cluster.shards}x{self.sc.cluster.copies} cluster and {self.sc.cluster.workers} workers")
            self.say(f"{self.sc.name}: seed {self.seed}, starting {what} ({self.backend_name})")
            w = self.sc.workload
            # how fast the host's cores ran while the workers trained (real runs only: a sim run's
            # timings come from its calibration; hostspeed.py)
            if isinstance(self.clock, WallClock):     # a sim's or a test's clock stamps no real sample
                self.speed = hostspeed.SpeedProbe(now=self.clock.now)
                self.speed.start()
            self.backend.start(workers_steps=w.steps, duration=w.duration_s, step_delay=w.step_delay_s)
            self.history.record("run-start", {"scenario": self.sc.name, "seed": self.seed, "run_id": self.run_id,
                                              "backend": self.backend_name,
                                              "cluster": self.sc.cluster.model_dump(), "proxied": self.backend.proxied,
                                              "schedule": [f.model_dump() for f in self.schedule],
                                              "expect": {**self.sc.selection(self.drawn).to_json(),
                                                         "metrics": list(self.sc.expect.metrics)},
                                              "context": self.context(),
                                              **getattr(self.backend, "run_facts", dict)(),
                                              **self._simulated()})
            self._drive()
            self.progress.update("healing")
            self._heal_all("end of workload")
            self._finish_workers()
            if self.speed is not None:
                self.speed.stop()           # the training is over: no more of the probe's CPU
            self.progress.update("settling")
            self._quiesce()
            self._observe()
            self.progress.update("judging")
        finally:
            self.tearing_down = True        # from here a signal only hurries teardown (see _on_term)
            if self.speed is not None:
                self.speed.stop()           # while the handlers still turn a signal into a hurry
            try:
                while True:
                    try:
                        self.backend.teardown()
                        break
                    except KeyboardInterrupt:   # landed before the flag was set; teardown is idempotent
                        self.backend.hurry = True
            finally:                            # whatever teardown raised, the rest still happens
                for sig, handler in prev.items():
                    signal.signal(sig, handler)
                self.history.close()
                self.progress.close()
                if not self.keep_data:   # node data and checkpoints were judged already; logs and events stay
                    self.backend.discard_data()
                try:                                  # after teardown (its processes reaped), and last
                    self.load_end = hostload.sample()
                except Exception:  # noqa: BLE001 - the host's load is context, never worth the run's report
                    self.load_end = None
        return self._judge(t_start)

    def _on_term(self, signum, frame) -> None:
        """Ctrl-C or SIGTERM stops the run (teardown follows in run's finally). One that comes during
        teardown must not abort it (the nft table and proxies would stay): it only hurries it.

        The KeyboardInterrupt is raised in whatever the main thread runs; inside a finalizer (the
        collector closing an HTTP connection's socket) Python prints "Exception ignored" and drops
        it, and the run went on against nodes the same Ctrl-C had killed (the interrupt soak: exit
        1, 29.7 s later). So the signal is sent again RESEND_S later unless teardown began by then:
        one lands in plain code (tests/unit/harness/run/test_runner_sigint.py)."""
        if self.tearing_down:
            self.backend.hurry = True
            return
        again = threading.Timer(RESEND_S, self._resend, (signum,))
        again.daemon = True
        again.start()
        raise KeyboardInterrupt(signal.Signals(signum).name)

    def _resend(self, signum: int) -> None:
        if not self.tearing_down:
            os.kill(os.getpid(), signum)

    # ---------------------------------------------------------------- faults
    def _drive(self) -> None:
        """Inject faults when their time or step comes, heal them when due, until workers finish."""
        pending = sorted(enumerate(self.schedule), key=lambda p: (p[1].at.time or 0, p[1].at.step or 0))
        watch = self.watch = StepWatcher(self.backend.events_path("worker-0"))
        t0 = self.t0_drive = self.clock.monotonic()
        w = self.sc.workload
        limit = (w.duration_s or 0) + 120 + w.steps * 0.5
        ctx = FaultContext(self.backend, self.rng, lambda f, v: self.history.record(f, v), w.steps, w.step_delay_s)
        self.sampling = True
        sampler = self.clock.spawn(self._sample, "sampler")      # a thread, or the simulator's turn-taker
        stall = self.stall = StallWatch(self.backend.event_files, w.stall_s, 0.0, alive=running_on(self.backend))
        try:
            self._loop(ctx, pending, watch, t0, limit, stall)
        finally:
            self.sampling = False
            self.clock.join(sampler, 5)
            self.history.record("progress-watch", stall.summary())
        for i, f in pending:
            self.history.record("fault-missed", {"index": i, "kind": f.kind, "selector": f.target,
                                                 "at": f.at.model_dump(), "why": "the workload ended first"})
            self.say(f"fault {i} ({f.kind} at {f.at}) never came due: the workload ended first")

    def _sample(self, period: float = 0.5) -> None:
        """The system's own sample every `period` s (each node's role and term, as it reports them)."""
        tick = 0
        while self.sampling:
            tick += 1
            try:
                self.system.sample(self.backend, self.history.record, tick)
            except Exception as e:  # noqa: BLE001 - a sample that failed is evidence, recorded and judged
                self.history.record("sample-error", {"tick": tick, "error": f"{e.__class__.__name__}: {e}"[:300]})
            self.clock.wait_until(lambda: not self.sampling, period, 0.05)

    def _loop(self, ctx: FaultContext, pending: list, watch: StepWatcher, t0: float, limit: float,
              stall: StallWatch) -> None:
        # a worker fault still open holds the loop for its heal (the restart of a worker the
        # harness drives); a job's `worker-0` is a role its scheduler restarts, not one of these
        hold = bool(self.backend.workers())
        while self.backend.workers_running() or (hold and any(o.target.startswith("worker-") for o in self.open)):
            now, step = self.clock.monotonic() - t0, watch.poll()
            # heals before injections: a fault whose inject waited for a protocol moment must not
            # find the one before it still open (one at a time, unless the nemesis overlaps them)
            for o in list(self.open):
                if (o.heal_at_t is not None and now >= o.heal_at_t) or \
                   (o.heal_at_step is not None and step >= o.heal_at_step):
                    self._heal(o, "scheduled")
                elif o.fault.finished():
                    self._heal(o, "finished")
            for item in list(pending):
                i, f = item
                if ((f.at.time is not None and now >= f.at.time) or (f.at.step is not None and step >= f.at.step)) \
                        and not waits(i, len(self.sc.faults), self.sc.nemesis, self.open):
                    pending.remove(item)
                    self._inject(ctx, i, f, now, step)
            self.progress.update("training", step, len(self.faults_done) + len(self.open))
            if self._stalled(stall, now, step, holding(self.open, self.clock.now(), stall.bound)):
                return
            if now > limit:      # judged, not raised: the evidence check makes the run unknown
                self.history.record("workload-timeout", {"limit_s": round(limit, 1), "step": step,
                                                         "running": [w for w in self.backend.workers()
                                                                     if self.backend.alive(w)]})
                self.say(f"workers still running after {limit:.0f}s; see the logs under {self.out / 'run'}")
                return
            self.clock.sleep(0.02)

    def _inject(self, ctx: FaultContext, i: int, spec, now: float, step: int) -> None:
        try:
            self._inject_one(ctx, i, spec, now, step)
        except Exception as e:  # noqa: BLE001 - a fault that did not happen is evidence, recorded
            self.history.record("fault-error", {"kind": spec.kind, "selector": spec.target, "index": i,
                                                "error": f"{e.__class__.__name__}: {e}"})
            self.say(f"fault {spec.kind} {spec.target} could not be injected: {e}")

    def _inject_one(self, ctx: FaultContext, i: int, spec, now: float, step: int) -> None:
        kind = spec.kind
        target = spec.target if (kind in LINK_KINDS or kind == "flap" or kind in NO_TARGET) \
            else resolve(spec.target, self.backend, self.rng)
        fault = build(kind, ctx, target, spec.params)
        info = {"kind": kind, "target": target, "selector": spec.target, "index": i, "step": step,
                "params": spec.params}
        if target.startswith("shard-"):
            shard = int(target.split("-")[1].split("/")[0])
            rec = self.backend.routing().get(shard)
            info.update(shard=shard, epoch=rec.epoch if rec else 0, was_primary=bool(rec and rec.primary == target))
        fault.info["index"] = i
        fault.epoch_before = info.get("epoch")      # a term won after this read is one the fault may cut off
        failed: BaseException | None = None
        try:
            fault.prepare()             # resolving and making what it needs: before its start time
        except BaseException as e:      # recorded as a failed injection below, as any other
            failed = e
        t_start = self.clock.now()
        o = OpenFault(i, kind, target, fault, t_start)
        if spec.duration_s:
            o.heal_at_t = now + spec.duration_s
        if spec.until is not None:
            o.heal_at_t = spec.until.time if spec.until.time is not None else o.heal_at_t
            o.heal_at_step = spec.until.step
        self.open.append(o)        # registered before it acts, so a partly injected fault is healed
        try:
            if failed is not None:
                raise failed
            fault.inject()
        except BaseException as e:
            info.update(fault.info)
            self.history.record("fault-start", {**info, "partial": True}, t=t_start)
            self._heal(o, f"injection failed: {e}")
            raise
        info.update(fault.info)
        o.target = info["target"]       # a kill timed to a promotion names the successor it hit
        if spec.duration_s and spec.until is None and "in_place_after_s" in fault.info:
            # a kill timed to a moment says when it landed: in place for duration_s from then, not
            # healed at once; any other fault keeps the schedule's times (from when it came due)
            o.heal_at_t = now + fault.info["in_place_after_s"] + spec.duration_s
        self.history.record("fault-start", info, t=t_start)
        self.say(f"fault: {kind} {target} at step {step}")
        if kind in ("restart", "scale-out", "scale-in"):
            self._heal(o, "instant")

    def _heal(self, o: OpenFault, why: str, cut_short: bool = False) -> None:
        """Undo a fault and record it; `cut_short`: healed before the time or step it was given."""
        if o in self.open:
            self.open.remove(o)
        heal_error = None
        try:
            o.fault.heal()
        except Exception as e:  # noqa: BLE001 - a fault that did not heal is evidence, recorded
            heal_error = f"{e.__class__.__name__}: {e}"
            self.say(f"healing {o.kind} {o.target} failed: {e}")
        ev = self.history.record("fault-stop", {"kind": o.kind, "target": o.target, "index": o.spec_index,
                                                "why": why, **({"heal_error": heal_error} if heal_error else {}),
                                                **({"cut_short": True} if cut_short else {}),
                                                **{k: v for k, v in o.fault.info.items()
                                                   if k in ("packets_dropped", "victims", "evidence", "migration",
                                                            "switched", "aborted", "routing_epoch", "bytes",
                                                            "key_bytes", "fenced_ms", "migration_error")}})
        self.faults_done.append({"kind": o.kind, "target": o.target, "start_s": o.start_t, "end_s": ev["t"],
                                 **({"reason": o.fault.info["reason"]} if "reason" in o.fault.info else {})})

    def _heal_all(self, why: str) -> None:
        now = self.clock.monotonic() - self.t0_drive
        step = self.watch.poll() if self.watch is not None else -1
        for o in list(self.open):
            early = (o.heal_at_t is not None and now < o.heal_at_t) or \
                (o.heal_at_step is not None and step < o.heal_at_step)
            self._heal(o, why, cut_short=early)

    def _stalled(self, stall: StallWatch, now: float, step: int, held: bool) -> bool:
        """One look of the stall watch; a stall is recorded (judged by `progress`, with who waited
        for what) and stops the run."""
        quiet = stall.tick(now, held, frozenset(o.target for o in self.open))
        if quiet is None:
            return False
        self.history.record("workload-stall", {"bound_s": stall.bound, "quiet_s": round(quiet, 3),
                                               "step": step, "stuck": stall.stuck})
        who = f" from {', '.join(stall.stuck)}" if stall.stuck else ""
        self.say(f"no step{who} for {quiet:.0f}s (workload.stall_s {stall.bound:g}): the workload stalled; "
                 "stopping the run")
        self.stalled = True
        return True

    def _finish_workers(self) -> None:
        """Workers a heal restarted at the end still owe their workload: wait for them (bounded),
        the stall watch still looking (one restarted at the last heal that then hangs is a stall,
        not a wait to the limit: review of issue 32, finding 1)."""
        w = self.sc.workload
        limit = (w.duration_s or 0) + 120 + w.steps * 0.5
        stall = self.stall

        def over() -> bool:
            if not self.backend.workers_running():
                return True
            step = self.watch.poll() if self.watch is not None else -1
            return stall is not None and self._stalled(stall, self.clock.monotonic() - self.t0_drive, step, False)
        if self.backend.workers_running() and not self.stalled:     # a stalled one would wait it out
            self.progress.update("training")
            if not self.clock.wait_until(over, limit, 0.1):
                self.say(f"workers still running {limit:.0f}s after the heal; the evidence check will say so")

    # ----------------------------------------------------------- observation
    def _quiesce(self) -> None:
        """Wait until the system came to rest, as it judges that (bounded)."""
        self.system.settle(self.backend, self.clock, self.history.record, self.say)

    def _observe(self) -> None:
        """Record what the checkers judge the run by: final states, final reads, checkpoint scans."""
        self.system.observe(self.backend, self.clock, self.history.record, self.say)


def default_out(scenario: Scenario, seed: int) -> Path:
    return Path("out") / f"{scenario.name}-{seed}"


__all__ = ["Runner", "default_out"]
